// The stream's state table (issue 34 §2, transport/stream_state.h): the invariants that the one end of a stream
// relies on, checked over every pair of states.
#include <gtest/gtest.h>

#include <vector>

#include "transport/stream_state.h"

namespace softndk::transport {
namespace {

using S = StreamState;
const std::vector<S> kAll = {S::kPrelude, S::kAwaitRtr, S::kRdma, S::kEnding, S::kDraining, S::kHalfClosed, S::kClosed};

// QP-21: once ended (flushed), a stream never takes posts or reads FPDUs again, and no state is entered twice.
TEST(StreamStateTest, QP_21_AnEndedStreamNeverReturnsToALiveState) {
    for (S from : kAll) {
        EXPECT_FALSE(StreamTransitionAllowed(from, from)) << StreamStateName(from);
        for (S to : kAll) {
            const bool ended_to_live = StreamEnded(from) && !StreamEnded(to);
            EXPECT_FALSE(ended_to_live && StreamTransitionAllowed(from, to))
                << StreamStateName(from) << " → " << StreamStateName(to);
            // the states are ordered: a stream only moves forward
            EXPECT_FALSE(to < from && StreamTransitionAllowed(from, to))
                << StreamStateName(from) << " → " << StreamStateName(to);
        }
    }
}

// A stream dropped off the lane (a send error) is reset: no Terminate to drain, no half-close.
TEST(StreamStateTest, CM_26_ADroppedStreamOnlyCloses) {
    for (S to : kAll) EXPECT_EQ(StreamTransitionAllowed(S::kEnding, to), to == S::kClosed) << StreamStateName(to);
}

// LIFE-09: every state reaches kClosed (the owner's Close always ends the descriptor), and kClosed is final.
TEST(StreamStateTest, LIFE_09_EveryStateReachesClosedAndClosedIsFinal) {
    for (S from : kAll) {
        EXPECT_TRUE(from == S::kClosed || StreamTransitionAllowed(from, S::kClosed)) << StreamStateName(from);
        EXPECT_FALSE(StreamTransitionAllowed(S::kClosed, from)) << StreamStateName(from);
    }
    // RFC 5040 §5.4: a Terminate is sent from any live state, so each can drain behind one.
    for (S from : {S::kPrelude, S::kAwaitRtr, S::kRdma}) EXPECT_TRUE(StreamTransitionAllowed(from, S::kDraining));
    EXPECT_TRUE(StreamTransitionAllowed(S::kDraining, S::kHalfClosed));
}

}  // namespace
}  // namespace softndk::transport
