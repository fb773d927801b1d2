#pragma once
// The compiler's own IEEE half, the reference for the stand-in's fp16 arithmetic. GCC < 13 has _Float16 in C++ on
// x86-64 only; on aarch64 its __fp16 converts with the same IEEE rounding (to nearest even).
#if defined(__aarch64__) && !defined(__clang__) && __GNUC__ < 13
using _Float16 = __fp16;
#endif
