// msprobe-inspect: the post-run tool for msprobe-shim dumps (docs/inspect.md).
#include "tools/inspect/commands.h"

int main(int argc, char **argv) { return msprobe::tools::inspect_main(argc, argv); }
