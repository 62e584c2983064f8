// The token table: random index + key, atomic lookup-and-reference, stale keys, draining.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include <softndk/softndk.h>

#include "mem/access_check.h"
#include "mem/token_table.h"
#include "mem/token_target.h"

namespace softndk::mem {
namespace {

TEST(TokenTableTest, TOK_ReservedSlotIsNotFindableUntilPublished) {
    TokenTable table(1);
    TokenTarget target;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    EXPECT_NE(index, 0u);
    TokenPair reserved = table.Tokens(index);
    EXPECT_FALSE(table.Acquire(reserved.local, TokenKind::kLocal));
    TokenPair published = table.Publish(index, &target);
    TokenRef ref = table.Acquire(published.local, TokenKind::kLocal);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref.target(), &target);
}

TEST(TokenTableTest, TOK_LookupTakesAReferenceAndStaleKeysFail) {
    TokenTable table(2);
    TokenTarget target;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    TokenPair tokens = table.Publish(index, &target);
    {
        TokenRef a = table.Acquire(tokens.local, TokenKind::kLocal);
        TokenRef b = table.Acquire(tokens.remote, TokenKind::kRemote);
        EXPECT_EQ(table.ReferenceCount(index), 2u);
        EXPECT_FALSE(table.Acquire(tokens.local, TokenKind::kRemote)) << "a local token is not a remote one";
        EXPECT_FALSE(table.Acquire(tokens.remote, TokenKind::kLocal));
        EXPECT_FALSE(table.Acquire(tokens.local ^ 0x01, TokenKind::kLocal)) << "wrong key";
        EXPECT_FALSE(table.Acquire(tokens.local ^ 0x100, TokenKind::kLocal)) << "wrong index";
        EXPECT_FALSE(table.Acquire(0, TokenKind::kLocal));
        EXPECT_FALSE(table.Acquire(0xFFFFFFFF, TokenKind::kLocal));
    }
    EXPECT_EQ(table.ReferenceCount(index), 0u);
    EXPECT_TRUE(table.Retire(index, nullptr, nullptr));
    EXPECT_FALSE(table.Acquire(tokens.local, TokenKind::kLocal)) << "retired";
    TokenPair again = table.Publish(index, &target);
    EXPECT_NE(again.local, tokens.local) << "the key changes on every publish";
    EXPECT_NE(again.remote, tokens.remote);
    EXPECT_FALSE(table.Acquire(tokens.local, TokenKind::kLocal)) << "the stale token stays dead";
    EXPECT_TRUE(table.Acquire(again.local, TokenKind::kLocal));
}

struct DrainProbe {
    int calls = 0;
    static void Hook(void* context) { ++static_cast<DrainProbe*>(context)->calls; }
};

TEST(TokenTableTest, TOK_RetireWaitsForTheLastReference) {
    TokenTable table(3);
    TokenTarget target;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    TokenPair tokens = table.Publish(index, &target);
    TokenRef a = table.Acquire(tokens.local, TokenKind::kLocal);
    TokenRef b = table.Acquire(tokens.local, TokenKind::kLocal);
    DrainProbe probe;
    EXPECT_FALSE(table.Retire(index, &DrainProbe::Hook, &probe));
    EXPECT_FALSE(table.Acquire(tokens.local, TokenKind::kLocal)) << "no new references while draining";
    EXPECT_EQ(a.target(), &target) << "held references still see the target";
    a.Reset();
    EXPECT_EQ(probe.calls, 0);
    TokenRef moved = std::move(b);
    EXPECT_FALSE(b);
    moved.Reset();
    EXPECT_EQ(probe.calls, 1);
    table.Free(index);
    EXPECT_EQ(table.LiveSlots(), 0u);
}

TEST(TokenTableTest, TOK_TokensAreDistinctAndNotAFixedStride) {
    TokenTable table(0);
    TokenTarget target;
    std::set<uint32_t> tokens;
    std::set<int64_t> strides;
    uint32_t previous = 0;
    for (int i = 0; i < 1000; ++i) {
        uint32_t index = 0;
        ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
        TokenPair pair = table.Publish(index, &target);
        EXPECT_TRUE(tokens.insert(pair.local).second);
        EXPECT_TRUE(tokens.insert(pair.remote).second);
        if (i > 0) strides.insert(static_cast<int64_t>(pair.local) - previous);
        previous = pair.local;
    }
    EXPECT_GT(strides.size(), 900u);
}

TEST(TokenTableTest, TOK_SameSeedSameTokens) {
    TokenTable a(42);
    TokenTable b(42);
    TokenTarget target;
    for (int i = 0; i < 10; ++i) {
        uint32_t ia = 0;
        uint32_t ib = 0;
        ASSERT_EQ(a.Reserve(&ia), STATUS_SUCCESS);
        ASSERT_EQ(b.Reserve(&ib), STATUS_SUCCESS);
        EXPECT_EQ(a.Publish(ia, &target).local, b.Publish(ib, &target).local);
    }
}

TEST(TokenTableTest, TOK_CapacityLimitIsEnforced) {
    TokenTable table(5, 3);
    uint32_t index = 0;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    EXPECT_EQ(table.Reserve(&index), STATUS_INSUFFICIENT_RESOURCES);
    table.Free(index);
    EXPECT_EQ(table.Reserve(&index), STATUS_SUCCESS);
}

TEST(TokenTableTest, TOK_PublishAvoidsTheOwnersPreviousTokens) {
    TokenTable table(9);
    TokenTarget target;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    TokenPair first = table.Publish(index, &target);
    for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(table.Retire(index, nullptr, nullptr));
        TokenPair next = table.Publish(index, &target, first);
        EXPECT_NE(next.local, first.local);
        EXPECT_NE(next.remote, first.remote);
        first = next;
    }
}

// Issue 19 §2, AMB-39: by default a fast-register slot publishes with the keys it was reserved with (the tokens a
// consumer reads after NdkInitializeFastRegisterMr), across every retire and publish.
TEST(TokenTableTest, AMB_39_PublishingKeepingKeysServesTheReservedTokensEveryCycle) {
    TokenTable table(3);
    TokenTarget target;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    const TokenPair reserved = table.Tokens(index);
    for (int cycle = 0; cycle < 3; ++cycle) {
        const TokenPair published = table.PublishKeepingKeys(index, &target);
        EXPECT_EQ(published.local, reserved.local);
        EXPECT_EQ(published.remote, reserved.remote);
        EXPECT_TRUE(table.Acquire(reserved.remote, TokenKind::kRemote));
        ASSERT_TRUE(table.Retire(index, nullptr, nullptr));
        EXPECT_FALSE(table.Acquire(reserved.remote, TokenKind::kRemote)) << "retired: refused until published";
        uint32_t seen = 0;
        EXPECT_FALSE(table.RotatedAway(reserved.remote, &seen)) << "nothing rotated";
    }
}

// The opt-in check: a rotated-away token fails, and the one access check names it with its slot and cycle.
TEST(TokenTableTest, AMB_39_ATokenRotatedAwayIsNamedWithItsSlotAndCycle) {
    TokenTable table(4);
    TokenTarget target;
    target.owner = &target;
    target.rights = kRightRemoteWrite;
    target.length = 4096;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    const TokenPair first = table.Publish(index, &target, table.Tokens(index), true);
    ASSERT_TRUE(table.Retire(index, nullptr, nullptr));
    const TokenPair second = table.Publish(index, &target, first, true);
    EXPECT_NE(second.remote, first.remote);
    uint32_t cycle = 0;
    EXPECT_TRUE(table.RotatedAway(first.remote, &cycle));
    EXPECT_EQ(cycle, 2u);
    EXPECT_FALSE(table.RotatedAway(second.remote, &cycle)) << "the live token";
    EXPECT_FALSE(table.RotatedAway(first.remote ^ 0x5A5A5A00u, &cycle)) << "another slot";

    TokenRef grant;
    const AccessError error =
        CheckAccess(table, {first.remote, TokenKind::kRemote, &target, 0, 64, kRightRemoteWrite}, &grant);
    EXPECT_EQ(error, AccessError::kInvalidToken);
    const std::string text = SoftNdkGetLastErrorText();
    char token[16];
    std::snprintf(token, sizeof(token), "0x%08X", first.remote);
    EXPECT_NE(text.find(token), std::string::npos) << text;
    EXPECT_NE(text.find("registration #2"), std::string::npos) << text;
    EXPECT_NE(text.find("SOFTNDK_ROTATE_FR_KEYS"), std::string::npos) << text;
}

// Issue 33 §4.1: the access check's refusal, explained. The peer's side (remote tokens) is checked here, where
// the text can be read: in the engine it goes to SOFTNDK_LOG only (tests/conformance/refusal_text_test.cpp has
// the local SGE's).
std::string Explain(TokenTable& table, uint32_t token, TokenKind kind, const void* pd, AccessError expected) {
    const AccessRequest request{token, kind, pd, 0, 64, kRightRemoteWrite};
    TokenRef grant;
    AccessRefusal refusal;
    EXPECT_EQ(CheckAccess(table, request, &grant, &refusal), expected);
    EXPECT_FALSE(grant);
    char text[512];
    DescribeRefusal(request, refusal, text, sizeof(text));
    char head[64];
    std::snprintf(head, sizeof(head), "token 0x%08X (%s) for PD %p: ", token,
                  kind == TokenKind::kLocal ? "local" : "remote", pd);
    EXPECT_EQ(std::string(text).rfind(head, 0), 0u) << text;
    return text;
}

TEST(TokenTableTest, TOK_06_ARefusedRemoteTokenIsExplained) {
    TokenTable table(5);
    TokenTarget target;
    target.owner = &target;
    target.rights = kRightRemoteWrite;
    target.length = 4096;
    uint32_t index = 0;
    ASSERT_EQ(table.Reserve(&index), STATUS_SUCCESS);
    const TokenPair tokens = table.Publish(index, &target);
    auto says = [](const std::string& text, const char* what) {
        EXPECT_NE(text.find(what), std::string::npos) << "expected \"" << what << "\" in: " << text;
    };
    says(Explain(table, tokens.local, TokenKind::kRemote, &target, AccessError::kInvalidToken),
         "the local token of an MR used as a remote token");
    says(Explain(table, 0x00FFFF42, TokenKind::kRemote, &target, AccessError::kInvalidToken), "unknown");
    int other_pd = 0;
    char owner[64];
    std::snprintf(owner, sizeof(owner), "another protection domain: it belongs to PD %p", static_cast<void*>(&target));
    says(Explain(table, tokens.remote, TokenKind::kRemote, &other_pd, AccessError::kWrongOwner), owner);
    target.rights = kRightRemoteRead;
    says(Explain(table, tokens.remote, TokenKind::kRemote, &target, AccessError::kNoRights),
         "grants remote read, the access needs remote write");
    target.rights = kRightRemoteWrite;
    target.base_va = 0x1000;
    says(Explain(table, tokens.remote, TokenKind::kRemote, &target, AccessError::kOutOfBounds),
         "[0x0, +64) is not inside the registration [0x1000, +4096)");
    ASSERT_TRUE(table.Retire(index, nullptr, nullptr));
    table.Free(index);
    says(Explain(table, tokens.remote, TokenKind::kRemote, &target, AccessError::kInvalidToken),
         "its MR was deregistered or closed");
}

}  // namespace
}  // namespace softndk::mem
