/* CANN stand-in: runtime/rt.h — umbrella header of the runtime API. */
#ifndef CCE_RUNTIME_RT_H
#define CCE_RUNTIME_RT_H

#include "base.h"
#include "dev.h"
#include "kernel.h"
#include "mem.h"
#include "stream.h"

#endif /* CCE_RUNTIME_RT_H */
