/* Test double of the shim's step marker: counts msprobe_shim_step() calls and reports them at exit. */
#include <stdio.h>
#include <stdlib.h>

static int g_steps;

static void report(void) { fprintf(stderr, "step_probe: msprobe_shim_step called %d times\n", g_steps); }

__attribute__((visibility("default"))) void msprobe_shim_step(void) {
  if (g_steps++ == 0) atexit(report);
}
