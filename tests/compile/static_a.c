/* MMS_STATIC: every public function is static, so two copies (this file and static_b.c) link into
   one program without clashing. */
#define MMS_STATIC
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include "../test.h"

int static_b_type_size(void);

static void compile_static(void) {
    EXPECT(mms_type_size(MMS_TYPE_F32) == 4, "f32 size in copy a");
    EXPECT(static_b_type_size() == 2, "f16 size in copy b");
}

int main(void) {
    RUN(compile_static);
    return test_summary();
}
