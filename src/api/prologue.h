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

/* The implementation uses POSIX threads, clocks and mmap. Strict C99 builds (-std=c99) hide them
   unless a feature macro is set before the first system header, so the file that defines
   MMSCHED_IMPLEMENTATION should include mmsched.h before anything else. */
#if defined(MMSCHED_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#  define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
#  define MMS_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#  define MMS_PRINTF(fmt_idx, args_idx)
#endif

#ifdef __cplusplus
extern "C" {
#endif
