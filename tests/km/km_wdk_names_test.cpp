// Issue 19 §1 ("Builds unchanged"): the routines with behaviour behind the WDK names an independent kernel NDK
// consumer uses: the ip2string Ex parsers, IoCreateDeviceSecure, the interface LUID/index/alias routines and IRP
// dispatch and completion. Every error path has its negative test.
#include <ifdef.h>
#include <ip2string.h>
#include <netioapi.h>
#include <ntddk.h>
#include <softndk_km.h>
#include <wdmsec.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <string>
#include <utility>
#include <vector>

namespace {

// ---- ip2string.h, the Ex forms ----
TEST(KM_19_Ip2String, Ipv4ExParsesAddressAndPortInNetworkOrder) {
    IN_ADDR address;
    USHORT port = 1;
    ASSERT_EQ(RtlIpv4StringToAddressExA("192.168.1.2:445", TRUE, &address, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_addr, htonl(0xC0A80102));
    EXPECT_EQ(port, htons(445));
    ASSERT_EQ(RtlIpv4StringToAddressExW(L"10.0.0.1", TRUE, &address, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_addr, htonl(0x0A000001));
    EXPECT_EQ(port, 0) << "no port: 0";
    ASSERT_EQ(RtlIpv4StringToAddressExW(L"10.0.0.1:65535", TRUE, &address, &port), STATUS_SUCCESS);
    EXPECT_EQ(port, htons(65535));
    ASSERT_EQ(RtlIpv4StringToAddressExA("0x7f.1:0", FALSE, &address, &port), STATUS_SUCCESS) << "loose form";
    EXPECT_EQ(address.S_un.S_addr, htonl(0x7F000001));
    EXPECT_EQ(port, 0);
}

TEST(KM_19_Ip2String, Ipv4ExRefusesBadText) {
    IN_ADDR address;
    USHORT port = 0;
    for (const char* bad : {"", "1.2.3", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:12a", "1.2.3.4 ", "1.2.3.4:-1",
                            "256.1.1.1", "1.2.3.4:80:80", "0x7f.1", "[1.2.3.4]:80", "01.2.3.4"}) {
        EXPECT_EQ(RtlIpv4StringToAddressExA(bad, TRUE, &address, &port), STATUS_INVALID_PARAMETER) << bad;
    }
    EXPECT_EQ(RtlIpv4StringToAddressExW(L"1.2.3.4:8\u00e90", TRUE, &address, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressExW(std::wstring(200, L'1').c_str(), FALSE, &address, &port),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressExA(nullptr, TRUE, &address, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressExA("1.2.3.4", TRUE, nullptr, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressExA("1.2.3.4", TRUE, &address, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressExW(nullptr, TRUE, &address, &port), STATUS_INVALID_PARAMETER);
}

TEST(KM_19_Ip2String, Ipv6ExParsesBracketsScopeAndPort) {
    IN6_ADDR address;
    ULONG scope = 7;
    USHORT port = 7;
    ASSERT_EQ(RtlIpv6StringToAddressExA("::1", &address, &scope, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.u.Byte[15], 1);
    EXPECT_EQ(scope, 0u);
    EXPECT_EQ(port, 0);
    ASSERT_EQ(RtlIpv6StringToAddressExW(L"[fe80::1%4]:445", &address, &scope, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.u.Byte[0], 0xfe);
    EXPECT_EQ(address.u.Byte[1], 0x80);
    EXPECT_EQ(address.u.Byte[15], 1);
    EXPECT_EQ(scope, 4u) << "scope id in host order";
    EXPECT_EQ(port, htons(445)) << "port in network order";
    ASSERT_EQ(RtlIpv6StringToAddressExA("fe80::2%12", &address, &scope, &port), STATUS_SUCCESS);
    EXPECT_EQ(scope, 12u);
    EXPECT_EQ(port, 0);
    ASSERT_EQ(RtlIpv6StringToAddressExA("[2001:db8::5]", &address, &scope, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.u.Byte[1], 0x01);
    EXPECT_EQ(address.u.Byte[15], 5);
    ASSERT_EQ(RtlIpv6StringToAddressExA("[::ffff:1.2.3.4]:1", &address, &scope, &port), STATUS_SUCCESS);
    EXPECT_EQ(address.u.Byte[12], 1);
    EXPECT_EQ(address.u.Byte[15], 4);
    EXPECT_EQ(port, htons(1));
}

TEST(KM_19_Ip2String, Ipv6ExRefusesBadText) {
    IN6_ADDR address;
    ULONG scope = 0;
    USHORT port = 0;
    for (const char* bad : {"", "[", "[::1", "::1]", "[::1]:", "[::1]:65536", "[::1]x", "::1%", "::1%x", "[::1%]:80",
                            "::1%99999999999", "1::2::3", "::1 ", "[::1]:80:80", "gg::1", "::1:80]", "1.2.3.4"}) {
        EXPECT_EQ(RtlIpv6StringToAddressExA(bad, &address, &scope, &port), STATUS_INVALID_PARAMETER) << bad;
    }
    EXPECT_EQ(RtlIpv6StringToAddressExW(L"[::1]:8\u00e9", &address, &scope, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressExA(nullptr, &address, &scope, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressExA("::1", nullptr, &scope, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressExA("::1", &address, nullptr, &port), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressExA("::1", &address, &scope, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressExW(nullptr, &address, &scope, &port), STATUS_INVALID_PARAMETER);
}

TEST(KM_19_Ip2String, Ipv6NonExStopsAtTheTerminatorAndTextRoundTrips) {
    IN6_ADDR address;
    PCSTR end = nullptr;
    const char text[] = "fe80::1%3";
    ASSERT_EQ(RtlIpv6StringToAddressA(text, &end, &address), STATUS_SUCCESS);
    EXPECT_EQ(end, text + 7);
    PCWSTR wend = nullptr;
    const wchar_t wide[] = L"::1]:80";
    ASSERT_EQ(RtlIpv6StringToAddressW(wide, &wend, &address), STATUS_SUCCESS);
    EXPECT_EQ(wend, wide + 3);
    EXPECT_EQ(RtlIpv6StringToAddressA("zz", &end, &address), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressA(nullptr, &end, &address), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6StringToAddressW(L"::1", nullptr, &address), STATUS_INVALID_PARAMETER);

    char out[INET6_ADDRSTRLEN];
    wchar_t wout[INET6_ADDRSTRLEN];
    EXPECT_EQ(RtlIpv6AddressToStringA(&address, out), out + 3);
    EXPECT_STREQ(out, "::1");
    EXPECT_EQ(RtlIpv6AddressToStringW(&address, wout), wout + 3);
    EXPECT_STREQ(wout, L"::1");
    IN_ADDR v4;
    v4.S_un.S_addr = htonl(0x7F000001);
    EXPECT_EQ(RtlIpv4AddressToStringA(&v4, out), out + 9);
    EXPECT_STREQ(out, "127.0.0.1");
    EXPECT_EQ(RtlIpv4AddressToStringW(&v4, wout), wout + 9);
    EXPECT_STREQ(wout, L"127.0.0.1");
}

TEST(KM_19_Ip2String, AddressToStringExAddsScopeAndPortAndReportsTheLengthNeeded) {
    IN_ADDR v4;
    v4.S_un.S_addr = htonl(0x0A000001);
    char text[64];
    ULONG length = sizeof(text);
    ASSERT_EQ(RtlIpv4AddressToStringExA(&v4, htons(445), text, &length), STATUS_SUCCESS);
    EXPECT_STREQ(text, "10.0.0.1:445");
    EXPECT_EQ(length, 13u) << "characters with the NUL";
    wchar_t wide[64];
    length = RTL_NUMBER_OF(wide);
    ASSERT_EQ(RtlIpv4AddressToStringExW(&v4, 0, wide, &length), STATUS_SUCCESS);
    EXPECT_STREQ(wide, L"10.0.0.1");
    IN6_ADDR v6;
    ULONG scope = 0;
    USHORT port = 0;
    ASSERT_EQ(RtlIpv6StringToAddressExA("fe80::1", &v6, &scope, &port), STATUS_SUCCESS);
    length = RTL_NUMBER_OF(wide);
    ASSERT_EQ(RtlIpv6AddressToStringExW(&v6, 4, htons(80), wide, &length), STATUS_SUCCESS);
    EXPECT_STREQ(wide, L"[fe80::1%4]:80");
    length = sizeof(text);
    ASSERT_EQ(RtlIpv6AddressToStringExA(&v6, 4, 0, text, &length), STATUS_SUCCESS);
    EXPECT_STREQ(text, "fe80::1%4");
    ASSERT_EQ(RtlIpv6StringToAddressExA(text, &v6, &scope, &port), STATUS_SUCCESS) << "round trip";
    EXPECT_EQ(scope, 4u);

    length = 5;  // too small: the length needed comes back
    EXPECT_EQ(RtlIpv4AddressToStringExA(&v4, htons(445), text, &length), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(length, 13u);
    length = 14;
    EXPECT_EQ(RtlIpv6AddressToStringExW(&v6, 4, htons(80), wide, &length), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(length, 15u);
    EXPECT_EQ(RtlIpv4AddressToStringExA(nullptr, 0, text, &length), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4AddressToStringExA(&v4, 0, nullptr, &length), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4AddressToStringExW(&v4, 0, wide, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6AddressToStringExA(nullptr, 0, 0, text, &length), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv6AddressToStringExW(&v6, 0, 0, nullptr, &length), STATUS_INVALID_PARAMETER);
}

// ---- netioapi.h: LUID, index and alias of softndk's interfaces ----
class KM_19_Interfaces : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(SoftNdkKmRegisterInterface(7, nullptr), STATUS_SUCCESS); }
    void TearDown() override { SoftNdkKmUnregisterInterface(7); }
};

TEST_F(KM_19_Interfaces, IndexLuidAndAliasRoundTrip) {
    NET_LUID luid;
    ASSERT_EQ(ConvertInterfaceIndexToLuid(7, &luid), STATUS_SUCCESS);
    EXPECT_EQ(luid.Info.NetLuidIndex, 7u);
    EXPECT_EQ(luid.Info.IfType, static_cast<ULONG64>(IF_TYPE_ETHERNET_CSMACD));
    IF_INDEX index = 0;
    ASSERT_EQ(ConvertInterfaceLuidToIndex(&luid, &index), STATUS_SUCCESS);
    EXPECT_EQ(index, 7u);
    WCHAR alias[NDIS_IF_MAX_STRING_SIZE + 1];
    ASSERT_EQ(ConvertInterfaceLuidToAlias(&luid, alias, RTL_NUMBER_OF(alias)), STATUS_SUCCESS);
    EXPECT_STREQ(alias, L"softndk 7");
    WCHAR exact[10];  // "softndk 7" and its NUL
    EXPECT_EQ(ConvertInterfaceLuidToAlias(&luid, exact, RTL_NUMBER_OF(exact)), STATUS_SUCCESS);
    NET_LUID back;
    ASSERT_EQ(ConvertInterfaceAliasToLuid(alias, &back), STATUS_SUCCESS);
    EXPECT_EQ(back.Value, luid.Value);
}

TEST_F(KM_19_Interfaces, UnknownInterfacesAndBadArgumentsAreRefused) {
    NET_LUID luid;
    EXPECT_EQ(ConvertInterfaceIndexToLuid(4242, &luid), STATUS_NOT_FOUND);
    EXPECT_EQ(ConvertInterfaceIndexToLuid(7, nullptr), STATUS_INVALID_PARAMETER);
    ASSERT_EQ(ConvertInterfaceIndexToLuid(7, &luid), STATUS_SUCCESS);
    NET_IFINDEX index = 0;
    EXPECT_EQ(ConvertInterfaceLuidToIndex(nullptr, &index), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ConvertInterfaceLuidToIndex(&luid, nullptr), STATUS_INVALID_PARAMETER);
    NET_LUID wrong_type = luid;
    wrong_type.Info.IfType = IF_TYPE_TUNNEL;
    EXPECT_EQ(ConvertInterfaceLuidToIndex(&wrong_type, &index), STATUS_NOT_FOUND);
    NET_LUID unknown = luid;
    unknown.Info.NetLuidIndex = 4242;
    EXPECT_EQ(ConvertInterfaceLuidToIndex(&unknown, &index), STATUS_NOT_FOUND);

    WCHAR alias[NDIS_IF_MAX_STRING_SIZE + 1];
    EXPECT_EQ(ConvertInterfaceLuidToAlias(&unknown, alias, RTL_NUMBER_OF(alias)), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ConvertInterfaceLuidToAlias(nullptr, alias, RTL_NUMBER_OF(alias)), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ConvertInterfaceLuidToAlias(&luid, nullptr, RTL_NUMBER_OF(alias)), STATUS_INVALID_PARAMETER);
    WCHAR short_buffer[9];  // no room for the NUL
    EXPECT_EQ(ConvertInterfaceLuidToAlias(&luid, short_buffer, RTL_NUMBER_OF(short_buffer)), STATUS_NO_MEMORY);
    EXPECT_EQ(ConvertInterfaceLuidToAlias(&luid, alias, 0), STATUS_NO_MEMORY);

    EXPECT_EQ(ConvertInterfaceAliasToLuid(L"softndk 4242", &luid), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ConvertInterfaceAliasToLuid(nullptr, &luid), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ConvertInterfaceAliasToLuid(L"softndk 7", nullptr), STATUS_INVALID_PARAMETER);

    ASSERT_EQ(SoftNdkKmUnregisterInterface(7), STATUS_SUCCESS);
    EXPECT_EQ(ConvertInterfaceLuidToIndex(&luid, &index), STATUS_NOT_FOUND) << "an unregistered interface";
    ASSERT_EQ(SoftNdkKmRegisterInterface(7, nullptr), STATUS_SUCCESS);
}

// ---- wdmsec.h and IRP dispatch ----
struct Reports {
    std::vector<std::pair<std::string, std::string>> seen;  // rule, call
};
VOID Collect(PVOID context, const SOFTNDK_VERIFIER_REPORT* report) {
    static_cast<Reports*>(context)->seen.emplace_back(report->Rule, report->Call);
}

class KM_19_Io : public ::testing::Test {
protected:
    void SetUp() override {
        RtlZeroMemory(&driver_, sizeof(driver_));
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_LOG);
        SoftNdkKmSetVerifierCallback(Collect, &reports_);
    }
    void TearDown() override {
        SoftNdkKmSetVerifierCallback(nullptr, nullptr);
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_ABORT);
        while (driver_.DeviceObject != nullptr) IoDeleteDevice(driver_.DeviceObject);
    }
    bool Saw(const std::string& rule, const std::string& call) const {
        for (const auto& [r, c] : reports_.seen)
            if (r == rule && c == call) return true;
        return false;
    }
    DRIVER_OBJECT driver_;
    Reports reports_;
};

TEST_F(KM_19_Io, CreateDeviceSecureAcceptsTheWdmsecStrings) {
    const UNICODE_STRING* strings[] = {&SDDL_DEVOBJ_KERNEL_ONLY,
                                       &SDDL_DEVOBJ_INF_SUPPLIED,
                                       &SDDL_DEVOBJ_SYS_ALL,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_ALL,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_RX,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R_RES_R,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX,
                                       &SDDL_DEVOBJ_SYS_ALL_ADM_ALL_WORLD_ALL_RES_ALL};
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, L"\\Device\\KmTest19");
    static const GUID kClass = {0x12345678, 0x1234, 0x1234, {1, 2, 3, 4, 5, 6, 7, 8}};
    for (const UNICODE_STRING* sddl : strings) {
        PDEVICE_OBJECT device = nullptr;
        ASSERT_EQ(IoCreateDeviceSecure(&driver_, 32, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE, sddl,
                                       &kClass, &device),
                  STATUS_SUCCESS);
        ASSERT_NE(device, nullptr);
        EXPECT_EQ(device->DriverObject, &driver_);
        EXPECT_EQ(device->DeviceType, static_cast<ULONG>(FILE_DEVICE_NETWORK));
        EXPECT_EQ(device->Characteristics, static_cast<ULONG>(FILE_DEVICE_SECURE_OPEN));
        EXPECT_NE(device->DeviceExtension, nullptr);
        EXPECT_EQ(driver_.DeviceObject, device);
        IoDeleteDevice(device);
        EXPECT_EQ(driver_.DeviceObject, nullptr);
    }
    PDEVICE_OBJECT device = nullptr;
    EXPECT_EQ(IoCreateDeviceSecure(&driver_, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, &SDDL_DEVOBJ_SYS_ALL, nullptr,
                                   &device),
              STATUS_SUCCESS)
        << "no name, no class GUID";
    EXPECT_EQ(device->DeviceExtension, nullptr);
    EXPECT_TRUE(reports_.seen.empty());
}

TEST_F(KM_19_Io, CreateDeviceSecureRefusesBadSddlAndArguments) {
    PDEVICE_OBJECT device = nullptr;
    for (const wchar_t* bad :
         {L"", L"D:", L"O:SYD:P(A;;GA;;;SY)", L"D:P(A;;GA;;;SY", L"D:P(X;;GA;;;SY)", L"D:P(A;;;;;SY)", L"D:P(A;;GA;;;)",
          L"D:P(A;;GA;;SY)", L"D:P(A;;GA;;;;SY)", L"D:P(A;;GA;;;SY)x", L"D:P (A;;GA;;;SY)"}) {
        UNICODE_STRING sddl;
        RtlInitUnicodeString(&sddl, bad);
        EXPECT_EQ(IoCreateDeviceSecure(&driver_, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, &sddl, nullptr, &device),
                  STATUS_INVALID_PARAMETER)
            << std::wstring(bad).size();
    }
    UNICODE_STRING empty_buffer = {0, 0, nullptr};
    EXPECT_EQ(
        IoCreateDeviceSecure(&driver_, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, &empty_buffer, nullptr, &device),
        STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCreateDeviceSecure(&driver_, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, nullptr, nullptr, &device),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCreateDeviceSecure(nullptr, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, &SDDL_DEVOBJ_SYS_ALL, nullptr,
                                   &device),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCreateDeviceSecure(&driver_, 0, nullptr, FILE_DEVICE_UNKNOWN, 0, FALSE, &SDDL_DEVOBJ_SYS_ALL, nullptr,
                                   nullptr),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(driver_.DeviceObject, nullptr) << "no device made by a refused call";
}

TEST_F(KM_19_Io, SymbolicLinksAreANameTable) {
    UNICODE_STRING link, device, other_case;
    RtlInitUnicodeString(&link, L"\\DosDevices\\KmTest19");
    RtlInitUnicodeString(&device, L"\\Device\\KmTest19");
    RtlInitUnicodeString(&other_case, L"\\DOSDEVICES\\kmtest19");
    SOFTNDK_KM_STATISTICS before;
    SoftNdkKmGetStatistics(&before);
    ASSERT_EQ(IoCreateSymbolicLink(&link, &device), STATUS_SUCCESS);
    SOFTNDK_KM_STATISTICS during;
    SoftNdkKmGetStatistics(&during);
    EXPECT_EQ(during.SymbolicLinks, before.SymbolicLinks + 1) << "a link not deleted would be a leak";
    EXPECT_EQ(IoCreateSymbolicLink(&other_case, &device), STATUS_OBJECT_NAME_COLLISION);
    EXPECT_EQ(IoDeleteSymbolicLink(&other_case), STATUS_SUCCESS);
    EXPECT_EQ(IoDeleteSymbolicLink(&link), STATUS_OBJECT_NAME_NOT_FOUND);
    UNICODE_STRING empty = {0, 0, nullptr};
    EXPECT_EQ(IoCreateSymbolicLink(&empty, &device), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCreateSymbolicLink(&link, &empty), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCreateSymbolicLink(nullptr, &device), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoDeleteSymbolicLink(nullptr), STATUS_INVALID_PARAMETER);
    SOFTNDK_KM_STATISTICS after;
    SoftNdkKmGetStatistics(&after);
    EXPECT_EQ(after.SymbolicLinks, before.SymbolicLinks);
}

constexpr ULONG kIoctlEcho = CTL_CODE(FILE_DEVICE_NETWORK, 0x801, METHOD_BUFFERED, FILE_ANY_ACCESS);

_Function_class_(DRIVER_DISPATCH) _Dispatch_type_(IRP_MJ_DEVICE_CONTROL) NTSTATUS
    DeviceControl(_In_ PDEVICE_OBJECT DeviceObject, _Inout_ PIRP Irp) {
    PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
    EXPECT_EQ(stack->MajorFunction, IRP_MJ_DEVICE_CONTROL);
    EXPECT_EQ(stack->DeviceObject, DeviceObject);
    NTSTATUS status = STATUS_INVALID_DEVICE_REQUEST;
    if (stack->Parameters.DeviceIoControl.IoControlCode == kIoctlEcho) {
        status = STATUS_SUCCESS;
        Irp->IoStatus.Information = stack->Parameters.DeviceIoControl.InputBufferLength;
    }
    Irp->IoStatus.Status = status;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return status;
}

PIRP DeviceControlIrp(ULONG code, ULONG input_length) {
    PIRP irp = IoAllocateIrp(1, FALSE);
    EXPECT_NE(irp, nullptr);
    PIO_STACK_LOCATION next = IoGetNextIrpStackLocation(irp);
    next->MajorFunction = IRP_MJ_DEVICE_CONTROL;
    next->Parameters.DeviceIoControl.IoControlCode = code;
    next->Parameters.DeviceIoControl.InputBufferLength = input_length;
    return irp;
}

TEST_F(KM_19_Io, DispatchRoutineCompletesAndSetsTheStatus) {
    driver_.MajorFunction[IRP_MJ_DEVICE_CONTROL] = DeviceControl;
    PDEVICE_OBJECT device = nullptr;
    ASSERT_EQ(IoCreateDevice(&driver_, 0, nullptr, FILE_DEVICE_NETWORK, 0, FALSE, &device), STATUS_SUCCESS);
    PIRP irp = DeviceControlIrp(kIoctlEcho, 24);
    IO_STATUS_BLOCK iosb = {};
    iosb.Status = STATUS_PENDING;
    KEVENT done;
    KeInitializeEvent(&done, NotificationEvent, FALSE);
    irp->UserIosb = &iosb;
    irp->UserEvent = &done;
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_SUCCESS);
    EXPECT_EQ(irp->IoStatus.Status, STATUS_SUCCESS);
    EXPECT_EQ(irp->IoStatus.Information, 24u);
    EXPECT_EQ(iosb.Status, STATUS_SUCCESS);
    EXPECT_EQ(iosb.Information, 24u);
    EXPECT_EQ(KeReadStateEvent(&done), 1);
    EXPECT_EQ(irp->CurrentLocation, irp->StackCount + 1) << "back with its allocator";

    IoReuseIrp(irp, STATUS_UNSUCCESSFUL);
    EXPECT_EQ(irp->IoStatus.Status, STATUS_UNSUCCESSFUL);
    IoGetNextIrpStackLocation(irp)->MajorFunction = IRP_MJ_DEVICE_CONTROL;
    IoGetNextIrpStackLocation(irp)->Parameters.DeviceIoControl.IoControlCode = kIoctlEcho + 4;
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_INVALID_DEVICE_REQUEST) << "an IOCTL the driver does not know";
    EXPECT_EQ(irp->IoStatus.Status, STATUS_INVALID_DEVICE_REQUEST);
    IoFreeIrp(irp);
    EXPECT_TRUE(reports_.seen.empty());
}

TEST_F(KM_19_Io, AnEmptyMajorFunctionCompletesWithInvalidDeviceRequest) {
    PDEVICE_OBJECT device = nullptr;
    ASSERT_EQ(IoCreateDevice(&driver_, 0, nullptr, FILE_DEVICE_NETWORK, 0, FALSE, &device), STATUS_SUCCESS);
    PIRP irp = DeviceControlIrp(kIoctlEcho, 0);
    IoGetNextIrpStackLocation(irp)->MajorFunction = IRP_MJ_READ;
    irp->IoStatus.Information = 99;
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_INVALID_DEVICE_REQUEST);
    EXPECT_EQ(irp->IoStatus.Status, STATUS_INVALID_DEVICE_REQUEST);
    EXPECT_EQ(irp->IoStatus.Information, 0u);
    IoFreeIrp(irp);
    EXPECT_EQ(IoCallDriver(nullptr, irp = IoAllocateIrp(1, FALSE)), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(IoCallDriver(device, nullptr), STATUS_INVALID_PARAMETER);
    IoFreeIrp(irp);
    EXPECT_EQ(IoAllocateIrp(0, FALSE), nullptr);
    EXPECT_EQ(IoAllocateIrp(33, FALSE), nullptr);
}

struct Completion {
    int calls = 0;
    NTSTATUS seen = STATUS_PENDING;
    NTSTATUS answer = STATUS_SUCCESS;
};
NTSTATUS OnComplete(PDEVICE_OBJECT, PIRP Irp, PVOID Context) {
    auto* completion = static_cast<Completion*>(Context);
    ++completion->calls;
    completion->seen = Irp->IoStatus.Status;
    return completion->answer;
}

TEST_F(KM_19_Io, CompletionRoutinesRunAsTheirFlagsSay) {
    driver_.MajorFunction[IRP_MJ_DEVICE_CONTROL] = DeviceControl;
    PDEVICE_OBJECT device = nullptr;
    ASSERT_EQ(IoCreateDevice(&driver_, 0, nullptr, FILE_DEVICE_NETWORK, 0, FALSE, &device), STATUS_SUCCESS);
    Completion completion;
    completion.answer = STATUS_MORE_PROCESSING_REQUIRED;
    PIRP irp = DeviceControlIrp(kIoctlEcho, 1);
    IoSetCompletionRoutine(irp, OnComplete, &completion, TRUE, TRUE, TRUE);
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_SUCCESS);
    EXPECT_EQ(completion.calls, 1);
    EXPECT_EQ(completion.seen, STATUS_SUCCESS);

    IoReuseIrp(irp, STATUS_SUCCESS);  // on error only: a success does not call it
    IoGetNextIrpStackLocation(irp)->MajorFunction = IRP_MJ_DEVICE_CONTROL;
    IoGetNextIrpStackLocation(irp)->Parameters.DeviceIoControl.IoControlCode = kIoctlEcho;
    IoSetCompletionRoutine(irp, OnComplete, &completion, FALSE, TRUE, FALSE);
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_SUCCESS);
    EXPECT_EQ(completion.calls, 1);
    IoFreeIrp(irp);
    EXPECT_TRUE(reports_.seen.empty());
}

TEST_F(KM_19_Io, CompletingTwiceOrWithPendingIsReported) {
    PIRP irp = IoAllocateIrp(1, FALSE);
    irp->IoStatus.Status = STATUS_SUCCESS;
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    EXPECT_FALSE(Saw("MULTIPLE_IRP_COMPLETE_REQUESTS", "IoCompleteRequest"));
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    EXPECT_TRUE(Saw("MULTIPLE_IRP_COMPLETE_REQUESTS", "IoCompleteRequest"));

    IoReuseIrp(irp, STATUS_PENDING);
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    EXPECT_TRUE(Saw("DRIVER_VERIFIER_IOMANAGER_VIOLATION", "IoCompleteRequest"));
    const size_t reports = reports_.seen.size();
    irp->IoStatus.Status = STATUS_SUCCESS;  // the refused completion did not count: this one is the first
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    EXPECT_EQ(reports_.seen.size(), reports);
    IoFreeIrp(irp);

    IRP foreign;
    RtlZeroMemory(&foreign, sizeof(foreign));
    IoFreeIrp(&foreign);
    EXPECT_TRUE(Saw("BAD_POOL_CALLER", "IoFreeIrp"));
    IoCompleteRequest(&foreign, IO_NO_INCREMENT);
    EXPECT_TRUE(Saw("DRIVER_VERIFIER_IOMANAGER_VIOLATION", "IoCompleteRequest"));
    IoReuseIrp(&foreign, STATUS_SUCCESS);
    EXPECT_TRUE(Saw("DRIVER_VERIFIER_IOMANAGER_VIOLATION", "IoReuseIrp"));
    DRIVER_OBJECT driver;
    RtlZeroMemory(&driver, sizeof(driver));
    DEVICE_OBJECT device;
    RtlZeroMemory(&device, sizeof(device));
    device.DriverObject = &driver;
    EXPECT_EQ(IoCallDriver(&device, &foreign), STATUS_INVALID_PARAMETER);
    EXPECT_TRUE(Saw("DRIVER_VERIFIER_IOMANAGER_VIOLATION", "IoCallDriver"));
}

TEST_F(KM_19_Io, FreeingAnIrpADriverHoldsOrRunningOutOfStackIsReported) {
    PDEVICE_OBJECT device = nullptr;
    ASSERT_EQ(IoCreateDevice(&driver_, 0, nullptr, FILE_DEVICE_NETWORK, 0, FALSE, &device), STATUS_SUCCESS);
    PIRP irp = IoAllocateIrp(1, FALSE);
    IoSetNextIrpStackLocation(irp);  // as if a driver held it
    EXPECT_EQ(IoCallDriver(device, irp), STATUS_INVALID_PARAMETER);
    EXPECT_TRUE(Saw("NO_MORE_IRP_STACK_LOCATIONS", "IoCallDriver"));
    IoFreeIrp(irp);
    EXPECT_TRUE(Saw("DRIVER_VERIFIER_IOMANAGER_VIOLATION", "IoFreeIrp"));
}

}  // namespace
