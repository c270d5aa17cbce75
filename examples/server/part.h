/* part.h - what every part of mllama-server (the headers beside this one) shares: the parts are
   headers of static functions, included by examples/server.c, tests/test_server.c and the fuzzer, each using
   some of them; SRV_FN keeps the compiler quiet about the rest. */
#ifndef MLLAMA_SERVER_PART_H
#define MLLAMA_SERVER_PART_H

#if defined(__GNUC__) || defined(__clang__)
#  define SRV_FN static __attribute__((unused))
#else
#  define SRV_FN static
#endif

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#endif
