// ir/hungarian.h -- forwarding header, kept only for runtime/cuda.c, which
// includes it as "../ir/hungarian.h".  The solver is the support library's
// now (support/support.h); delete this file once runtime/cuda.c (being
// split, issue 17 item 3) includes "support.h" instead.  tests/layering.sh
// lists this as its one exception.
#include "support.h"
