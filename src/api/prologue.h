#ifndef MMSCHED_H
#define MMSCHED_H

#define MMS_VERSION_MAJOR @MMS_VERSION_MAJOR@
#define MMS_VERSION_MINOR @MMS_VERSION_MINOR@
#define MMS_VERSION_PATCH @MMS_VERSION_PATCH@
#define MMS_VERSION_STRING "@MMS_VERSION@"

/* MMS_API decorates every public function: extern by default, static under MMS_STATIC
   (so two differently configured copies can live in one program). */
#ifndef MMS_API
#  if defined(MMS_STATIC) && (defined(__GNUC__) || defined(__clang__))
#    define MMS_API static __attribute__((unused))
#  elif defined(MMS_STATIC)
#    define MMS_API static
#  else
#    define MMS_API extern
#  endif
#endif

/* MinGW: the C99 printf family (%zu, %lld), not the old msvcrt's, which lacks them. */
#if defined(__MINGW32__) && !defined(__USE_MINGW_ANSI_STDIO)
#  define __USE_MINGW_ANSI_STDIO 1
#endif

/* Parts left out (MMS_NO_GGUF, MMS_NO_TEXT, MMS_NO_MLLAMA; define them before every include of
   the header, the same everywhere). Each layer goes with the ones it rests on: the tokenizer reads
   GGUF (and JSON) files, mllama reads them and writes a checkpoint folder's tokenizer. */
#if defined(MMS_NO_GGUF) && !defined(MMS_NO_TEXT)
#  define MMS_NO_TEXT
#endif
#if defined(MMS_NO_TEXT) && !defined(MMS_NO_MLLAMA)
#  define MMS_NO_MLLAMA
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#if defined(__MINGW32__) && !__USE_MINGW_ANSI_STDIO && !defined(_UCRT)
#  error "mmsched: with MinGW and msvcrt, include mmsched.h before other headers or define __USE_MINGW_ANSI_STDIO=1 (its messages use %zu)"
#endif

#if defined(__MINGW32__) && defined(__MINGW_PRINTF_FORMAT)
#  define MMS_PRINTF(fmt_idx, args_idx) __attribute__((format(__MINGW_PRINTF_FORMAT, fmt_idx, args_idx)))
#elif defined(__GNUC__) || defined(__clang__)
#  define MMS_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#  define MMS_PRINTF(fmt_idx, args_idx)
#endif

#ifdef __cplusplus
extern "C" {
#endif
