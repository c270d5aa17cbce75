/* The second static copy of the library, linked with static_a.c. */
#define MMS_STATIC
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"

int static_b_type_size(void);
int static_b_type_size(void) { return (int)mms_type_size(MMS_TYPE_F16); }
