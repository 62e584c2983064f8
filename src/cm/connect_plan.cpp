// The transport choice for NdkConnect (issue 7 §4).
#include "cm/connect_plan.h"

#include "common/last_error.h"

namespace softndk::cm {

bool UsesWire(uint32_t transport, const Endpoint& destination) {
    if (transport == SOFTNDK_TRANSPORT_TCP) return true;
    if (transport != SOFTNDK_TRANSPORT_AUTO) return false;
    return !Fabric::Instance().HasListener(destination);  // a listener elsewhere: another process or host
}

NTSTATUS PrepareConnect(ConnectionSide& side, ConnectPlan* plan) {
    plan->over_wire = UsesWire(plan->transport, plan->wire.remote);
    if (plan->over_wire && !plan->shared_endpoint) return STATUS_SUCCESS;
    if (!side.HoldTuple(plan->wire.local, plan->wire.remote)) {
        SetLastErrorText("NdkConnect: this 4-tuple is connected already (CM-04, CM-06): STATUS_ADDRESS_ALREADY_EXISTS");
        return STATUS_ADDRESS_ALREADY_EXISTS;
    }
    return STATUS_SUCCESS;
}

ChannelOpening OpenChannel(const std::shared_ptr<ConnectionSide>& side, engine::QueuePair* qp, ConnectPlan plan) {
    if (plan.over_wire) return OpenWireChannel(side, std::move(plan.wire));
    return OpenInProcessChannel(side, qp, plan.in_process, plan.wire.local, plan.wire.remote,
                                std::move(plan.wire.private_data));
}

}  // namespace softndk::cm
