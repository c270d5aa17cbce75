/* Linked into the Windows builds of the tests and examples: their standard streams in binary
   mode, so what they print has LF line ends as on every other system (text mode would write CR LF,
   which the harness, and whoever pipes the output on, would have to strip). */
#include <fcntl.h>
#include <io.h>
#include <stdio.h>

__attribute__((constructor)) static void windows_binary_stdio(void) {
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
}
