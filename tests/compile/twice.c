/* Include once for declarations, then again (twice) with the implementation, as stb allows. */
#include "../../mmsched.h"

static int uses_declarations_only(void) { return mms_type_size(MMS_TYPE_F16) == 2; }

#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include "../../mmsched.h"
#include "../test.h"

static void compile_twice(void) {
    EXPECT(uses_declarations_only(), "f16 size");
    EXPECT(strcmp(mms_type_name(MMS_TYPE_BF16), "bf16") == 0, "implementation present");
}

int main(void) {
    RUN(compile_twice);
    return test_summary();
}
