// softndk-kmhost: loads a kernel-style NDK consumer built as a shared object, calls its DriverEntry with a
// DRIVER_OBJECT and a registry path, runs it until asked to stop, calls DriverUnload and reports leaks
// (issue 9 §2). Exit status: 0 clean, 1 usage, 2 load failure, 3 DriverEntry failed, 4 leaks,
// 5 Verifier violations (log mode; abort mode stops at the first).
#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ntddk.h>
#include <softndk_km.h>

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
    g_stop.store(true);
}

int Usage() {
    std::fprintf(stderr,
                 "usage: softndk-kmhost [options] DRIVER.so\n"
                 "  --completion inline|pend|random   completion mode of interface 1 (default inline)\n"
                 "  --seed N                          random completion / token seed\n"
                 "  --fault SPEC                      Function[:nth=N|:p=F][:async][:status=0x..] (repeatable)\n"
                 "  --verifier abort|log|off          what a Verifier violation does (default abort)\n"
                 "  --stop-when-idle                  stop once DriverEntry returned and no work item, timer or\n"
                 "                                    DPC is pending for 200 ms\n"
                 "  --seconds N                       stop after N seconds (default: SIGINT / SIGTERM)\n"
                 "  --registry-path PATH              the RegistryPath DriverEntry receives\n"
                 "  --parameter NAME=VALUE            a value under RegistryPath\\Parameters (ZwQueryValueKey):\n"
                 "                                    REG_DWORD when VALUE is a number (decimal or 0x…), else\n"
                 "                                    REG_SZ (repeatable)\n");
    return 1;
}

std::wstring Widen(const std::string& text) {
    return std::wstring(text.begin(), text.end());
}

// --parameter NAME=VALUE: a number becomes REG_DWORD, anything else REG_SZ.
bool SetParameters(const std::wstring& key, const std::vector<std::string>& parameters) {
    for (const std::string& parameter : parameters) {
        const size_t equals = parameter.find('=');
        const std::wstring name = Widen(parameter.substr(0, equals));
        const std::string text = parameter.substr(equals + 1);
        char* end = nullptr;
        const unsigned long number = std::strtoul(text.c_str(), &end, 0);
        NTSTATUS status;
        if (!text.empty() && *end == '\0' && number <= 0xFFFFFFFFul &&
            std::isdigit(static_cast<unsigned char>(text[0]))) {
            const ULONG dword = static_cast<ULONG>(number);
            status = SoftNdkKmSetRegistryValue(key.c_str(), name.c_str(), REG_DWORD, &dword, sizeof(dword));
        } else {
            const std::wstring wide = Widen(text);
            status = SoftNdkKmSetRegistryValue(key.c_str(), name.c_str(), REG_SZ, wide.c_str(),
                                               static_cast<ULONG>((wide.size() + 1) * sizeof(WCHAR)));
        }
        if (!NT_SUCCESS(status)) return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    std::string driver_path, registry_path;
    std::vector<std::string> parameters;
    bool stop_when_idle = false;
    double seconds = -1;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "--completion") {
            const char* mode = value();
            if (mode == nullptr) return Usage();
            std::string m = mode;
            if (m == "inline") {
                config.CompletionMode = SOFTNDK_COMPLETION_INLINE;
            } else if (m == "pend") {
                config.CompletionMode = SOFTNDK_COMPLETION_PEND;
            } else if (m == "random") {
                config.CompletionMode = SOFTNDK_COMPLETION_RANDOM;
            } else {
                return Usage();
            }
        } else if (arg == "--seed") {
            const char* seed = value();
            if (seed == nullptr) return Usage();
            config.RandomSeed = static_cast<ULONG>(std::strtoul(seed, nullptr, 0));
        } else if (arg == "--fault") {
            const char* spec = value();
            if (spec == nullptr || !NT_SUCCESS(SoftNdkKmParseFaults(spec, &config))) return Usage();
        } else if (arg == "--verifier") {
            const char* mode = value();
            if (mode == nullptr) return Usage();
            std::string m = mode;
            SoftNdkKmSetVerifierMode(m == "off"   ? SOFTNDK_VERIFIER_OFF
                                     : m == "log" ? SOFTNDK_VERIFIER_LOG
                                                  : SOFTNDK_VERIFIER_ABORT);
        } else if (arg == "--stop-when-idle") {
            stop_when_idle = true;
        } else if (arg == "--seconds") {
            const char* s = value();
            if (s == nullptr) return Usage();
            seconds = std::strtod(s, nullptr);
        } else if (arg == "--registry-path") {
            const char* path = value();
            if (path == nullptr) return Usage();
            registry_path = path;
        } else if (arg == "--parameter") {
            const char* parameter = value();
            if (parameter == nullptr || std::strchr(parameter, '=') == nullptr || parameter[0] == '=') return Usage();
            parameters.push_back(parameter);
        } else if (!arg.empty() && arg[0] == '-') {
            return Usage();
        } else {
            driver_path = arg;
        }
    }
    if (driver_path.empty()) return Usage();
    if (!NT_SUCCESS(SoftNdkKmRegisterInterface(1, &config))) return Usage();

    void* module = dlopen(driver_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
        std::fprintf(stderr, "softndk-kmhost: cannot load %s: %s\n", driver_path.c_str(), dlerror());
        return 2;
    }
    auto* entry = reinterpret_cast<PDRIVER_INITIALIZE>(dlsym(module, "DriverEntry"));
    if (entry == nullptr) {
        std::fprintf(stderr, "softndk-kmhost: %s has no extern \"C\" DriverEntry\n", driver_path.c_str());
        return 2;
    }

    std::string name = driver_path.substr(driver_path.find_last_of('/') + 1);
    name = name.substr(0, name.find('.'));
    if (registry_path.empty()) registry_path = "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\" + name;
    std::wstring wide_registry = Widen(registry_path), wide_name = Widen("\\Driver\\" + name);
    if (!SetParameters(wide_registry + L"\\Parameters", parameters)) return Usage();
    UNICODE_STRING registry;
    RtlInitUnicodeString(&registry, wide_registry.c_str());
    DRIVER_EXTENSION extension{};
    DRIVER_OBJECT driver{};
    driver.Type = 4;
    driver.Size = sizeof(driver);
    driver.DriverExtension = &extension;
    extension.DriverObject = &driver;
    RtlInitUnicodeString(&driver.DriverName, wide_name.c_str());
    RtlInitUnicodeString(&extension.ServiceKeyName, wide_name.c_str() + 8);
    driver.DriverInit = entry;

    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);

    const ULONG violations_before = SoftNdkKmVerifierViolationCount();
    NTSTATUS status = entry(&driver, &registry);  // at PASSIVE_LEVEL, like the I/O manager
    const char* status_name = SoftNdkStatusName(status);
    std::fprintf(stderr, "softndk-kmhost: DriverEntry(%s) = %s (0x%08X)\n", name.c_str(),
                 status_name ? status_name : "NTSTATUS", static_cast<unsigned>(status));
    int exit_code = 0;
    if (!NT_SUCCESS(status)) {
        exit_code = 3;  // Windows does not call DriverUnload after a failed DriverEntry
    } else {
        const auto start = std::chrono::steady_clock::now();
        auto idle_since = start;
        while (!g_stop.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const auto now = std::chrono::steady_clock::now();
            if (seconds >= 0 && now - start >= std::chrono::duration<double>(seconds)) break;
            if (stop_when_idle) {
                if (!SoftNdkKmIsIdle()) idle_since = now;
                if (now - idle_since >= std::chrono::milliseconds(200)) break;
            }
        }
        if (driver.DriverUnload == nullptr) {
            std::fprintf(stderr, "softndk-kmhost: the driver set no DriverUnload, so it cannot be stopped\n");
        } else {
            driver.DriverUnload(&driver);
            std::fprintf(stderr, "softndk-kmhost: DriverUnload returned\n");
        }
    }
    const ULONG leaks = SoftNdkKmReportLeaks();
    if (leaks != 0 && exit_code == 0) exit_code = 4;
    const ULONG violations = SoftNdkKmVerifierViolationCount() - violations_before;
    if (violations != 0) {
        std::fprintf(stderr, "softndk-kmhost: %u Verifier violation(s)\n", violations);
        if (exit_code == 0) exit_code = 5;
    }
    if (SoftNdkKmIsIdle()) {
        SoftNdkKmShutdown();
        dlclose(module);  // only when no driver code can still run
    }
    if (exit_code == 0) std::fprintf(stderr, "softndk-kmhost: clean exit, no leaks\n");
    return exit_code;
}
