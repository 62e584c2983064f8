// User-facing error texts carry no requirement ids: SetLastErrorText drops an aside that holds only ids (" (CM-14)",
// " (AMB-27, CB-15…19)") and keeps every other aside; SOFTNDK_VERBOSE=1 keeps the ids (checked in a child process,
// so that the setting stays out of this process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <softndk/softndk.h>

#include "common/last_error.h"

namespace {

TEST(LastErrorTextTest, AsidesOfRequirementIdsAreLeftOutOfUserFacingTexts) {
    if (std::getenv("SOFTNDK_VERBOSE") != nullptr) GTEST_SKIP() << "SOFTNDK_VERBOSE is set for this run";
    softndk::SetLastErrorText(
        "NdkCreateQp: depth 0 (QP-02); allowed 1 %s 16 (FR-23) (AMB-27, CB-15\xE2\x80\xA6"
        "19)"
        " kept (a reason, CM-14) and (not an id)",
        "\xE2\x80\xA6");
    EXPECT_STREQ(SoftNdkGetLastErrorText(),
                 "NdkCreateQp: depth 0; allowed 1 \xE2\x80\xA6 16 kept (a reason, CM-14) and (not an id)");
    softndk::SetLastErrorText("no aside at all");
    EXPECT_STREQ(SoftNdkGetLastErrorText(), "no aside at all");
}

TEST(LastErrorTextTest, VerboseKeepsTheRequirementIds) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        setenv("SOFTNDK_VERBOSE", "1", 1);
        softndk::SetLastErrorText("refused (MR-08)");
        _exit(std::string(SoftNdkGetLastErrorText()) == "refused (MR-08)" ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "SOFTNDK_VERBOSE=1 keeps ' (MR-08)'";
}

}  // namespace
