// The registry a driver reads its parameters from (ZwOpenKey, ZwQueryValueKey, ZwClose), and ip2string.h's
// RtlIpv4StringToAddress (issue 9 §2: what an NDK consumer's DriverEntry uses to find its peer).
#include <ip2string.h>
#include <ntddk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace {

const wchar_t kKey[] = L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\kmtest\\Parameters";

NTSTATUS Open(const wchar_t* path, HANDLE* key, HANDLE root = nullptr) {
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, path);
    OBJECT_ATTRIBUTES attributes;
    InitializeObjectAttributes(&attributes, &name, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, root, nullptr);
    return ZwOpenKey(key, KEY_READ, &attributes);
}

NTSTATUS Query(HANDLE key, const wchar_t* value, std::vector<UCHAR>* buffer, ULONG* needed) {
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, value);
    return ZwQueryValueKey(key, &name, KeyValuePartialInformation, buffer->empty() ? nullptr : buffer->data(),
                           static_cast<ULONG>(buffer->size()), needed);
}

ULONG OpenKeys() {
    SOFTNDK_KM_STATISTICS statistics;
    SoftNdkKmGetStatistics(&statistics);
    return statistics.RegistryKeysOpen;
}

class KmRegistry : public ::testing::Test {
protected:
    void SetUp() override {
        const ULONG port = 4711;
        ASSERT_EQ(SoftNdkKmSetRegistryValue(kKey, L"Port", REG_DWORD, &port, sizeof(port)), STATUS_SUCCESS);
        const wchar_t role[] = L"server";
        ASSERT_EQ(SoftNdkKmSetRegistryValue(kKey, L"Role", REG_SZ, role, sizeof(role)), STATUS_SUCCESS);
        open_before_ = OpenKeys();
    }
    void TearDown() override { EXPECT_EQ(OpenKeys(), open_before_) << "every handle the test opened is closed"; }
    ULONG open_before_ = 0;
};

TEST_F(KmRegistry, ADriverReadsADwordAndAStringFromItsParametersKey) {
    HANDLE key = nullptr;
    ASSERT_EQ(Open(kKey, &key), STATUS_SUCCESS);
    EXPECT_EQ(OpenKeys(), open_before_ + 1);
    std::vector<UCHAR> buffer(64);
    ULONG needed = 0;
    ASSERT_EQ(Query(key, L"Port", &buffer, &needed), STATUS_SUCCESS);
    const auto* value = reinterpret_cast<KEY_VALUE_PARTIAL_INFORMATION*>(buffer.data());
    EXPECT_EQ(value->Type, static_cast<ULONG>(REG_DWORD));
    EXPECT_EQ(value->DataLength, sizeof(ULONG));
    EXPECT_EQ(*reinterpret_cast<const ULONG*>(value->Data), 4711u);
    EXPECT_EQ(needed, offsetof(KEY_VALUE_PARTIAL_INFORMATION, Data) + sizeof(ULONG));
    ASSERT_EQ(Query(key, L"ROLE", &buffer, &needed), STATUS_SUCCESS) << "value names are case-insensitive";
    EXPECT_EQ(value->Type, static_cast<ULONG>(REG_SZ));
    EXPECT_STREQ(reinterpret_cast<const wchar_t*>(value->Data), L"server");
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
}

TEST_F(KmRegistry, KeyPathsAreCaseInsensitiveAndAParentKeyExists) {
    HANDLE key = nullptr;
    ASSERT_EQ(Open(L"\\REGISTRY\\Machine\\SYSTEM\\CurrentControlSet\\Services\\KMTEST\\parameters", &key),
              STATUS_SUCCESS);
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
    HANDLE service = nullptr;
    ASSERT_EQ(Open(L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\kmtest", &service), STATUS_SUCCESS);
    HANDLE relative = nullptr;
    ASSERT_EQ(Open(L"Parameters", &relative, service), STATUS_SUCCESS) << "a name relative to an open key";
    std::vector<UCHAR> buffer(64);
    ULONG needed = 0;
    EXPECT_EQ(Query(relative, L"Port", &buffer, &needed), STATUS_SUCCESS);
    EXPECT_EQ(ZwClose(relative), STATUS_SUCCESS);
    EXPECT_EQ(ZwClose(service), STATUS_SUCCESS);
}

TEST_F(KmRegistry, AMissingKeyOrValueIsObjectNameNotFound) {
    HANDLE key = nullptr;
    EXPECT_EQ(Open(L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\nosuch\\Parameters", &key),
              STATUS_OBJECT_NAME_NOT_FOUND);
    EXPECT_EQ(Open(L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\kmtes", &key),
              STATUS_OBJECT_NAME_NOT_FOUND)
        << "a prefix of a key's name is not a key";
    ASSERT_EQ(Open(kKey, &key), STATUS_SUCCESS);
    std::vector<UCHAR> buffer(64);
    ULONG needed = 0;
    EXPECT_EQ(Query(key, L"Nothing", &buffer, &needed), STATUS_OBJECT_NAME_NOT_FOUND);
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
}

TEST_F(KmRegistry, ShortBuffersGetTheNeededLengthAndTheHeaderWhenItFits) {
    HANDLE key = nullptr;
    ASSERT_EQ(Open(kKey, &key), STATUS_SUCCESS);
    const ULONG header = offsetof(KEY_VALUE_PARTIAL_INFORMATION, Data);
    const ULONG whole = header + sizeof(L"server");
    std::vector<UCHAR> none;
    ULONG needed = 0;
    EXPECT_EQ(Query(key, L"Role", &none, &needed), STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(needed, whole);
    std::vector<UCHAR> just_header(header);
    EXPECT_EQ(Query(key, L"Role", &just_header, &needed), STATUS_BUFFER_OVERFLOW);
    const auto* value = reinterpret_cast<KEY_VALUE_PARTIAL_INFORMATION*>(just_header.data());
    EXPECT_EQ(value->Type, static_cast<ULONG>(REG_SZ));
    EXPECT_EQ(value->DataLength, sizeof(L"server"));
    EXPECT_EQ(needed, whole);
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
}

TEST_F(KmRegistry, BadArgumentsAndHandlesAreRefused) {
    HANDLE key = nullptr;
    EXPECT_EQ(ZwOpenKey(&key, KEY_READ, nullptr), STATUS_INVALID_PARAMETER);
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, kKey);
    OBJECT_ATTRIBUTES attributes;
    InitializeObjectAttributes(&attributes, &name, 0, nullptr, nullptr);
    EXPECT_EQ(ZwOpenKey(&key, 0x00000002 /* KEY_SET_VALUE */, &attributes), STATUS_ACCESS_DENIED)
        << "the store is read-only for drivers";
    EXPECT_EQ(Open(L"Services\\kmtest", &key), STATUS_OBJECT_PATH_NOT_FOUND) << "relative without a root";
    int not_a_key = 0;
    EXPECT_EQ(Open(L"Parameters", &key, &not_a_key), STATUS_INVALID_HANDLE);
    EXPECT_EQ(ZwClose(&not_a_key), STATUS_INVALID_HANDLE);
    ASSERT_EQ(Open(kKey, &key), STATUS_SUCCESS);
    UNICODE_STRING value;
    RtlInitUnicodeString(&value, L"Port");
    UCHAR buffer[64];
    ULONG needed = 0;
    EXPECT_EQ(ZwQueryValueKey(key, &value, KeyValueFullInformation, buffer, sizeof(buffer), &needed),
              STATUS_NOT_SUPPORTED)
        << "only KeyValuePartialInformation is emulated";
    EXPECT_EQ(ZwQueryValueKey(key, &value, KeyValuePartialInformation, buffer, sizeof(buffer), nullptr),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
    EXPECT_EQ(ZwClose(key), STATUS_INVALID_HANDLE) << "closed twice";
    EXPECT_EQ(ZwQueryValueKey(key, &value, KeyValuePartialInformation, buffer, sizeof(buffer), &needed),
              STATUS_INVALID_HANDLE);
    EXPECT_EQ(SoftNdkKmSetRegistryValue(nullptr, L"x", REG_DWORD, buffer, 4), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(SoftNdkKmSetRegistryValue(kKey, L"x", REG_DWORD, nullptr, 4), STATUS_INVALID_PARAMETER);
}

TEST_F(KmRegistry, AnOpenKeyIsReportedAsALeak) {
    HANDLE key = nullptr;
    ASSERT_EQ(Open(kKey, &key), STATUS_SUCCESS);
    testing::internal::CaptureStderr();
    const ULONG leaks = SoftNdkKmReportLeaks();
    const std::string report = testing::internal::GetCapturedStderr();
    EXPECT_GE(leaks, 1u);
    EXPECT_NE(report.find("registry key handle"), std::string::npos) << report;
    EXPECT_EQ(ZwClose(key), STATUS_SUCCESS);
}

TEST(KmIp2String, StrictTakesFourDecimalPartsAndSaysWhereTheAddressEnds) {
    IN_ADDR address{};
    PCWSTR end = nullptr;
    const wchar_t text[] = L"192.168.7.42:445";
    ASSERT_EQ(RtlIpv4StringToAddressW(text, TRUE, &end, &address), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_un_b.s_b1, 192);
    EXPECT_EQ(address.S_un.S_un_b.s_b4, 42);
    EXPECT_EQ(end, text + 12) << "the terminator points at the ':'";
    PCSTR end_a = nullptr;
    ASSERT_EQ(RtlIpv4StringToAddressA("127.0.0.1", TRUE, &end_a, &address), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_addr, RtlUlongByteSwap(0x7F000001));
    EXPECT_EQ(*end_a, '\0');
}

TEST(KmIp2String, StrictRefusesShortFormsOctalAndOutOfRangeParts) {
    IN_ADDR address{};
    PCSTR end = nullptr;
    for (const char* bad : {"", "1.2.3", "256.1.1.1", "01.2.3.4", "1.2.3.4444", "0x7f.0.0.1", "a.b.c.d", "1..2.3"})
        EXPECT_EQ(RtlIpv4StringToAddressA(bad, TRUE, &end, &address), STATUS_INVALID_PARAMETER) << bad;
    EXPECT_EQ(RtlIpv4StringToAddressA(nullptr, TRUE, &end, &address), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RtlIpv4StringToAddressA("1.2.3.4", TRUE, nullptr, &address), STATUS_INVALID_PARAMETER);
}

TEST(KmIp2String, LooseAcceptsTheShortAndHexForms) {
    IN_ADDR address{};
    PCSTR end = nullptr;
    ASSERT_EQ(RtlIpv4StringToAddressA("0x7f.1", FALSE, &end, &address), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_addr, RtlUlongByteSwap(0x7F000001));
    ASSERT_EQ(RtlIpv4StringToAddressA("10.0.0.9", FALSE, &end, &address), STATUS_SUCCESS);
    EXPECT_EQ(address.S_un.S_addr, RtlUlongByteSwap(0x0A000009));
}

}  // namespace
