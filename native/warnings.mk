# The warnings every C build of ours uses (included by each Makefile that compiles our C;
# scripts/check.sh builds them all). Warnings are errors, so a new warning stops the build
# where it was introduced instead of scrolling past in a quiet `make -s`.
#
# Beyond -Wall -Wextra, the ones that fit this code:
#   -Wshadow              long benchmark and scheduler functions: an inner name hiding a
#                         file-level one (spots, workers) reads the wrong variable silently.
#   -Wformat=2            most output is printf-built JSON and diagnostics; this adds the
#                         format-security and non-literal-format checks to -Wall's.
#   -Wstrict-prototypes   `f()` in C11 declares a function without checking its arguments.
#   -Wmissing-prototypes  every function is either in a header or static; a stray global
#                         could collide with the harness or libc at link time.
#   -Wvla                 threads run on fixed stacks (ulsched's own stacks, small pthread
#                         stacks in the benchmarks): no stack use sized at run time.
#   -Wundef               an #if on a misspelt or missing macro is an error, not false.
#
# Left out on purpose: -Wconversion/-Wsign-conversion (about 80 findings, nearly all
# int <-> size_t on counts that are small by construction; casts everywhere would hide
# the real ones) and -Wwrite-strings (exec's `char *const argv[]` takes string literals).
C_WARNINGS := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
	-Wmissing-prototypes -Wvla -Wundef
# Objects depend on this file, so changing the warnings rebuilds (and re-checks) everything.
WARNINGS_MK := $(lastword $(MAKEFILE_LIST))
