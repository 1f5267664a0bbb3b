/*
 * Simulated NVML for burnin's simulator.
 *
 * Exports the NVML entry points that burnin's collector reaches through the
 * real pynvml, with the real signatures, struct layouts and return codes.
 * Each nvmlInit* reads the node's state from the text file named by the
 * environment variable BURNIN_SIM_NVML: one "key=value" per line, global keys
 * (driver_version=...) and per-GPU keys (gpu.<index>.<field>=...). Lists are
 * comma separated. Unknown keys are ignored so the Python side can add fields.
 *
 * Events (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2):
 * the node's event stream is the append-only file "nvml.events" beside the
 * state file, written by `burnin sim fault` (burnin.sim.events), one event a
 * line: "event <gpu> <type> <data>", "lost <gpu>" (the GPU falls off the bus:
 * the wait returns NVML_ERROR_GPU_IS_LOST) or "error <code>" (the wait returns
 * that error once, as when the driver is reloaded). A set delivers the lines
 * appended after its creation.
 *
 * Build: cc -shared -fPIC -O2 -o libnvidia-ml.so.1 nvml_sim.c
 */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
};

#define MAX_GPUS 64
#define MAX_LINKS 18
#define NVLINK_COUNTERS 5
#define MEMORY_LOCATIONS 8
#define THRESHOLDS 8
#define MAX_PROCS 16

/* nvmlEventType* bits (nvml.h) */
#define EVENT_SINGLE_BIT_ECC 0x1ULL
#define EVENT_DOUBLE_BIT_ECC 0x2ULL
#define EVENT_PSTATE 0x4ULL
#define EVENT_XID 0x8ULL
#define EVENT_CLOCK 0x10ULL
#define EVENT_DRAM_RETIREMENT 0x400ULL
#define EVENT_DRAM_RETIREMENT_FAILURE 0x800ULL
#define EVENT_GPU_UNAVAILABLE 0x4000ULL
#define EVENT_GPU_RECOVERY_ACTION 0x8000ULL
/* What an H100 offers; the state key supported_event_types overrides it (0: no events). */
#define DEFAULT_SUPPORTED_EVENTS (EVENT_SINGLE_BIT_ECC | EVENT_DOUBLE_BIT_ECC | EVENT_PSTATE | EVENT_XID | \
                                  EVENT_CLOCK | EVENT_DRAM_RETIREMENT | EVENT_DRAM_RETIREMENT_FAILURE | \
                                  EVENT_GPU_UNAVAILABLE | EVENT_GPU_RECOVERY_ACTION)

typedef struct {
    char name[96];
    char uuid[96];
    char serial[30];
    char bus_id[32];
    char vbios[32];
    char board_part[80];
    char inforom_image[16];
    char inforom_object[4][16]; /* by nvmlInforomObject_t: OEM, ECC, POWER, DEN; "" = not supported */
    char cpulist[512];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    unsigned long long mem_total, mem_reserved, mem_used;
    int lost;
    unsigned persistence, mig_current, mig_pending, ecc_current, ecc_pending;
    /* [error type: 0 corrected, 1 uncorrected][counter: 0 volatile, 1 aggregate][location] */
    unsigned long long ecc[2][2][MEMORY_LOCATIONS];
    unsigned remap_corr, remap_unc, remap_pending, remap_failure;
    unsigned remap_hist[5];
    unsigned long long clock_reasons, supported_clock_reasons;
    unsigned temp, mem_temp;
    unsigned thresholds[THRESHOLDS];
    unsigned power_enforced, power_default, power_limit, power_min, power_max, power_usage;
    unsigned pcie_gen_curr, pcie_gen_max, pcie_gen_gpu_max, pcie_width_curr, pcie_width_max;
    unsigned pcie_replay;
    unsigned nvlink_count;
    unsigned nvlink_active[MAX_LINKS];
    unsigned long long nvlink_err[NVLINK_COUNTERS][MAX_LINKS];
    unsigned fabric_supported, fabric_state, fabric_status, fabric_health_mask, fabric_clique;
    int numa_node;
    unsigned minor, module_id;
    unsigned recovery_action;
    unsigned nvlink_speed_mbps;
    unsigned utilization_gpu, clock_sm;
    unsigned compute_pids[MAX_PROCS]; /* 0 ends the list */
} sim_gpu;

typedef struct {
    char driver_version[80];
    char nvml_version[80];
    int cuda_version;
    unsigned count;
    int init_error;
    unsigned long long supported_events;
    sim_gpu gpus[MAX_GPUS];
} sim_state;

static sim_state g_state;
static int g_refcount;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ parsing */

enum kind { K_STR, K_UINT, K_INT, K_ULL, K_UINT_LIST, K_ULL_LIST };

typedef struct {
    const char *key;
    enum kind kind;
    size_t offset;
    size_t size; /* bytes for K_STR, element count for lists */
} field;

#define F_STR(k, m) {k, K_STR, offsetof(sim_gpu, m), sizeof(((sim_gpu *)0)->m)}
#define F_UINT(k, m) {k, K_UINT, offsetof(sim_gpu, m), 1}
#define F_INT(k, m) {k, K_INT, offsetof(sim_gpu, m), 1}
#define F_ULL(k, m) {k, K_ULL, offsetof(sim_gpu, m), 1}
#define F_ULIST(k, m, n) {k, K_UINT_LIST, offsetof(sim_gpu, m), n}
#define F_LLIST(k, m, n) {k, K_ULL_LIST, offsetof(sim_gpu, m), n}
#define ECC(k, t, c, l) {k, K_ULL, offsetof(sim_gpu, ecc) + sizeof(unsigned long long) * \
                         (((t) * 2 + (c)) * MEMORY_LOCATIONS + (l)), 1}
#define NVL(k, c) {k, K_ULL_LIST, offsetof(sim_gpu, nvlink_err) + \
                   sizeof(unsigned long long) * (c) * MAX_LINKS, MAX_LINKS}

static const field GPU_FIELDS[] = {
    F_STR("name", name),
    F_STR("uuid", uuid),
    F_STR("serial", serial),
    F_STR("bus_id", bus_id),
    F_STR("vbios", vbios),
    F_STR("board_part", board_part),
    F_STR("inforom_image", inforom_image),
    F_STR("inforom_oem", inforom_object[0]),
    F_STR("inforom_ecc", inforom_object[1]),
    F_STR("inforom_power", inforom_object[2]),
    F_STR("inforom_den", inforom_object[3]),
    F_STR("cpulist", cpulist),
    F_UINT("domain", domain),
    F_UINT("bus", bus),
    F_UINT("device", device),
    F_UINT("pci_device_id", pci_device_id),
    F_UINT("pci_subsystem_id", pci_subsystem_id),
    F_ULL("memory_total", mem_total),
    F_ULL("memory_reserved", mem_reserved),
    F_ULL("memory_used", mem_used),
    F_INT("lost", lost),
    F_UINT("persistence", persistence),
    F_UINT("mig_current", mig_current),
    F_UINT("mig_pending", mig_pending),
    F_UINT("ecc_current", ecc_current),
    F_UINT("ecc_pending", ecc_pending),
    ECC("ecc_corrected_volatile_dram", 0, 0, 2),
    ECC("ecc_corrected_volatile_sram", 0, 0, 7),
    ECC("ecc_corrected_aggregate_dram", 0, 1, 2),
    ECC("ecc_corrected_aggregate_sram", 0, 1, 7),
    ECC("ecc_uncorrected_volatile_dram", 1, 0, 2),
    ECC("ecc_uncorrected_volatile_sram", 1, 0, 7),
    ECC("ecc_uncorrected_aggregate_dram", 1, 1, 2),
    ECC("ecc_uncorrected_aggregate_sram", 1, 1, 7),
    F_UINT("remap_correctable", remap_corr),
    F_UINT("remap_uncorrectable", remap_unc),
    F_UINT("remap_pending", remap_pending),
    F_UINT("remap_failure", remap_failure),
    F_ULIST("remap_histogram", remap_hist, 5),
    F_ULL("clock_event_reasons", clock_reasons),
    F_ULL("supported_clock_event_reasons", supported_clock_reasons),
    F_UINT("temperature", temp),
    F_UINT("memory_temperature", mem_temp),
    F_ULIST("temperature_thresholds", thresholds, THRESHOLDS),
    F_UINT("power_enforced_mw", power_enforced),
    F_UINT("power_default_mw", power_default),
    F_UINT("power_limit_mw", power_limit),
    F_UINT("power_min_mw", power_min),
    F_UINT("power_max_mw", power_max),
    F_UINT("power_usage_mw", power_usage),
    F_UINT("pcie_gen_current", pcie_gen_curr),
    F_UINT("pcie_gen_max", pcie_gen_max),
    F_UINT("pcie_gen_gpu_max", pcie_gen_gpu_max),
    F_UINT("pcie_width_current", pcie_width_curr),
    F_UINT("pcie_width_max", pcie_width_max),
    F_UINT("pcie_replay", pcie_replay),
    F_UINT("nvlink_count", nvlink_count),
    F_ULIST("nvlink_active", nvlink_active, MAX_LINKS),
    NVL("nvlink_replay", 0),
    NVL("nvlink_recovery", 1),
    NVL("nvlink_crc_flit", 2),
    NVL("nvlink_crc_data", 3),
    NVL("nvlink_ecc_data", 4),
    F_UINT("nvlink_speed_mbps", nvlink_speed_mbps),
    F_UINT("fabric_supported", fabric_supported),
    F_UINT("fabric_state", fabric_state),
    F_UINT("fabric_status", fabric_status),
    F_UINT("fabric_health_mask", fabric_health_mask),
    F_UINT("fabric_clique", fabric_clique),
    F_INT("numa_node", numa_node),
    F_UINT("minor", minor),
    F_UINT("module_id", module_id),
    F_UINT("recovery_action", recovery_action),
    F_UINT("utilization_gpu", utilization_gpu),
    F_UINT("clock_sm", clock_sm),
    F_ULIST("compute_pids", compute_pids, MAX_PROCS),
};

static void copy_str(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void parse_list(void *base, enum kind kind, size_t count, const char *value) {
    const char *p = value;
    for (size_t i = 0; i < count && *p; i++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 0);
        if (kind == K_UINT_LIST) ((unsigned *)base)[i] = (unsigned)v;
        else ((unsigned long long *)base)[i] = v;
        if (*end != ',') break;
        p = end + 1;
    }
}

static void set_gpu_field(sim_gpu *gpu, const char *key, const char *value) {
    for (size_t i = 0; i < sizeof(GPU_FIELDS) / sizeof(GPU_FIELDS[0]); i++) {
        const field *f = &GPU_FIELDS[i];
        if (strcmp(f->key, key) != 0) continue;
        char *base = (char *)gpu + f->offset;
        switch (f->kind) {
        case K_STR: copy_str(base, f->size, value); break;
        case K_UINT: *(unsigned *)base = (unsigned)strtoul(value, NULL, 0); break;
        case K_INT: *(int *)base = (int)strtol(value, NULL, 0); break;
        case K_ULL: *(unsigned long long *)base = strtoull(value, NULL, 0); break;
        case K_UINT_LIST:
        case K_ULL_LIST: parse_list(base, f->kind, f->size, value); break;
        }
        return;
    }
}

static void set_global(sim_state *st, const char *key, const char *value) {
    if (strcmp(key, "driver_version") == 0) copy_str(st->driver_version, sizeof st->driver_version, value);
    else if (strcmp(key, "nvml_version") == 0) copy_str(st->nvml_version, sizeof st->nvml_version, value);
    else if (strcmp(key, "cuda_version") == 0) st->cuda_version = (int)strtol(value, NULL, 0);
    else if (strcmp(key, "device_count") == 0) {
        unsigned long n = strtoul(value, NULL, 0);
        st->count = n > MAX_GPUS ? MAX_GPUS : (unsigned)n;
    } else if (strcmp(key, "init_error") == 0) st->init_error = (int)strtol(value, NULL, 0);
    else if (strcmp(key, "supported_event_types") == 0) st->supported_events = strtoull(value, NULL, 0);
}

static int load_state(sim_state *st) {
    const char *path = getenv("BURNIN_SIM_NVML");
    if (path == NULL || *path == '\0') return NVML_ERROR_DRIVER_NOT_LOADED;
    FILE *fh = fopen(path, "r");
    if (fh == NULL) return NVML_ERROR_DRIVER_NOT_LOADED;
    memset(st, 0, sizeof *st);
    st->supported_events = DEFAULT_SUPPORTED_EVENTS;
    char line[4096];
    while (fgets(line, sizeof line, fh) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *eq = strchr(line, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        const char *key = line, *value = eq + 1;
        if (strncmp(key, "gpu.", 4) == 0) {
            char *end;
            unsigned long index = strtoul(key + 4, &end, 10);
            if (*end != '.' || index >= MAX_GPUS) continue;
            set_gpu_field(&st->gpus[index], end + 1, value);
        } else {
            set_global(st, key, value);
        }
    }
    fclose(fh);
    return st->init_error;
}

/* --------------------------------------------------------------- helpers */

typedef sim_gpu *nvmlDevice_t;

static int initialized(void) { return __atomic_load_n(&g_refcount, __ATOMIC_ACQUIRE) > 0; }

/* Resolve a handle: NVML_SUCCESS, or the error the call must return. */
static nvmlReturn_t check_device(nvmlDevice_t dev) {
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (dev == NULL || dev < g_state.gpus || dev >= g_state.gpus + g_state.count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->lost) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

#define DEVICE_OR_RETURN(dev)                  \
    do {                                       \
        nvmlReturn_t rc_ = check_device(dev);  \
        if (rc_ != NVML_SUCCESS) return rc_;   \
    } while (0)

static nvmlReturn_t put_string(char *buf, unsigned length, const char *value) {
    if (buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(value);
    if (length < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, value, n + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------ init and system */

static nvmlReturn_t do_init(void) {
    pthread_mutex_lock(&g_lock);
    static sim_state fresh;
    int rc = load_state(&fresh);
    if (rc == NVML_SUCCESS) {
        memcpy(&g_state, &fresh, sizeof g_state);
        __atomic_add_fetch(&g_refcount, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlInit(void) { return do_init(); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&g_lock);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (g_refcount <= 0) rc = NVML_ERROR_UNINITIALIZED;
    else __atomic_sub_fetch(&g_refcount, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt Request Issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 21: return "No data";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    return put_string(version, length, g_state.driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    /* Answers without nvmlInit, as the real library does. */
    if (!initialized()) {
        static sim_state probe;
        pthread_mutex_lock(&g_lock);
        int rc = load_state(&probe);
        nvmlReturn_t out = rc == NVML_SUCCESS ? put_string(version, length, probe.nvml_version)
                                              : (nvmlReturn_t)rc;
        pthread_mutex_unlock(&g_lock);
        return out;
    }
    return put_string(version, length, g_state.nvml_version);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    *version = g_state.cuda_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return nvmlSystemGetCudaDriverVersion(version);
}

/* --------------------------------------------------------- enumeration */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    *count = g_state.count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= g_state.count) return NVML_ERROR_INVALID_ARGUMENT;
    if (g_state.gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
    *device = &g_state.gpus[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static int same_bus_id(const char *a, const char *b) {
    /* Accept any domain width: "0000:1b:00.0" equals "00000000:1B:00.0". */
    const char *ra = strchr(a, ':'), *rb = strchr(b, ':');
    if (ra == NULL || rb == NULL) return 0;
    return strtoul(a, NULL, 16) == strtoul(b, NULL, 16) && strcasecmp(ra, rb) == 0;
}

static nvmlReturn_t find_device(int (*match)(const sim_gpu *, const char *), const char *key,
                                nvmlDevice_t *device) {
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (key == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < g_state.count; i++) {
        if (match(&g_state.gpus[i], key)) {
            if (g_state.gpus[i].lost) return NVML_ERROR_GPU_IS_LOST;
            *device = &g_state.gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

static int match_bus(const sim_gpu *g, const char *key) { return same_bus_id(g->bus_id, key); }
static int match_uuid(const sim_gpu *g, const char *key) { return strcmp(g->uuid, key) == 0; }
static int match_serial(const sim_gpu *g, const char *key) { return strcmp(g->serial, key) == 0; }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
    return find_device(match_bus, bus_id, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
    return find_device(match_bus, bus_id, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    return find_device(match_uuid, uuid, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device) {
    return find_device(match_serial, serial, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    DEVICE_OR_RETURN(dev);
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)(dev - g_state.gpus);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int *minor) {
    DEVICE_OR_RETURN(dev);
    if (minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = dev->minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetModuleId(nvmlDevice_t dev, unsigned int *module_id) {
    DEVICE_OR_RETURN(dev);
    if (module_id == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *module_id = dev->module_id;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------- identity */

#define STRING_GETTER(fn, member)                                               \
    EXPORT nvmlReturn_t fn(nvmlDevice_t dev, char *buf, unsigned int length) {  \
        DEVICE_OR_RETURN(dev);                                                  \
        return put_string(buf, length, dev->member);                            \
    }

STRING_GETTER(nvmlDeviceGetName, name)
STRING_GETTER(nvmlDeviceGetUUID, uuid)
STRING_GETTER(nvmlDeviceGetSerial, serial)
STRING_GETTER(nvmlDeviceGetBoardPartNumber, board_part)

/* Firmware versions: an empty value in the state is one the device does not report (NOT_SUPPORTED),
 * as H100s answer for the InfoROM power-management object (nvidia-smi -q prints N/A). */
static nvmlReturn_t put_version(char *buf, unsigned length, const char *value) {
    if (value[0] == '\0') return NVML_ERROR_NOT_SUPPORTED;
    return put_string(buf, length, value);
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t dev, char *buf, unsigned int length) {
    DEVICE_OR_RETURN(dev);
    return put_version(buf, length, dev->vbios);
}

EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t dev, char *buf, unsigned int length) {
    DEVICE_OR_RETURN(dev);
    return put_version(buf, length, dev->inforom_image);
}

/* object: nvmlInforomObject_t (0 OEM, 1 ECC, 2 POWER, 3 DEN); NVML_INFOROM_COUNT and above are invalid. */
EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t dev, int object, char *buf, unsigned int length) {
    DEVICE_OR_RETURN(dev);
    if (object < 0 || object >= 4) return NVML_ERROR_INVALID_ARGUMENT;
    return put_version(buf, length, dev->inforom_object[object]);
}

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

static nvmlReturn_t fill_pci(nvmlDevice_t dev, nvmlPciInfo_t *pci, int legacy_only) {
    DEVICE_OR_RETURN(dev);
    if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, legacy_only ? offsetof(nvmlPciInfo_t, busId) : sizeof *pci);
    /* The legacy field holds the short form "0000:1B:00.0". */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", dev->domain & 0xffff,
             dev->bus, dev->device);
    pci->domain = dev->domain;
    pci->bus = dev->bus;
    pci->device = dev->device;
    pci->pciDeviceId = dev->pci_device_id;
    pci->pciSubSystemId = dev->pci_subsystem_id;
    if (!legacy_only) copy_str(pci->busId, sizeof pci->busId, dev->bus_id);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) { return fill_pci(dev, pci, 0); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t dev, nvmlPciInfo_t *pci) { return fill_pci(dev, pci, 0); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t dev, nvmlPciInfo_t *pci) { return fill_pci(dev, pci, 1); }

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

#define NVML_MEMORY_V2 ((unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem) {
    DEVICE_OR_RETURN(dev);
    if (mem == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    /* v1 counts the driver's reservation as used memory. */
    mem->total = dev->mem_total;
    mem->used = dev->mem_used + dev->mem_reserved;
    mem->free = dev->mem_total - mem->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem) {
    DEVICE_OR_RETURN(dev);
    if (mem == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (mem->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    mem->total = dev->mem_total;
    mem->reserved = dev->mem_reserved;
    mem->used = dev->mem_used;
    mem->free = dev->mem_total - dev->mem_reserved - dev->mem_used;
    return NVML_SUCCESS;
}

/* -------------------------------------------------------------- modes */

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, unsigned int *mode) {
    DEVICE_OR_RETURN(dev);
    if (mode == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = dev->persistence;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    DEVICE_OR_RETURN(dev);
    if (current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *current = dev->mig_current;
    *pending = dev->mig_pending;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    DEVICE_OR_RETURN(dev);
    if (current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *current = dev->ecc_current;
    *pending = dev->ecc_pending;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------- memory errors */

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, unsigned int error_type,
                                                unsigned int counter_type, unsigned long long *count) {
    DEVICE_OR_RETURN(dev);
    if (count == NULL || error_type > 1 || counter_type > 1) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total = 0;
    for (int loc = 0; loc < MEMORY_LOCATIONS; loc++) total += dev->ecc[error_type][counter_type][loc];
    *count = total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t dev, unsigned int error_type,
                                                    unsigned int counter_type, unsigned int location,
                                                    unsigned long long *count) {
    DEVICE_OR_RETURN(dev);
    if (count == NULL || error_type > 1 || counter_type > 1 || location >= MEMORY_LOCATIONS)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* Hopper reports DRAM (device memory) and SRAM; the older cache locations are gone. */
    if (location != 2 && location != 7) return NVML_ERROR_NOT_SUPPORTED;
    *count = dev->ecc[error_type][counter_type][location];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                              unsigned int *pending, unsigned int *failure) {
    DEVICE_OR_RETURN(dev);
    if (corr == NULL || unc == NULL || pending == NULL || failure == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *corr = dev->remap_corr;
    *unc = dev->remap_unc;
    *pending = dev->remap_pending;
    *failure = dev->remap_failure;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned int max, high, partial, low, none;
} nvmlRowRemapperHistogramValues_t;

EXPORT nvmlReturn_t nvmlDeviceGetRowRemapperHistogram(nvmlDevice_t dev, nvmlRowRemapperHistogramValues_t *v) {
    DEVICE_OR_RETURN(dev);
    if (v == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    v->max = dev->remap_hist[0];
    v->high = dev->remap_hist[1];
    v->partial = dev->remap_hist[2];
    v->low = dev->remap_hist[3];
    v->none = dev->remap_hist[4];
    return NVML_SUCCESS;
}

/* ---------------------------------------------- clocks, thermal, power */

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *reasons) {
    DEVICE_OR_RETURN(dev);
    if (reasons == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = dev->clock_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *reasons) {
    return nvmlDeviceGetCurrentClocksEventReasons(dev, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t dev, unsigned long long *reasons) {
    DEVICE_OR_RETURN(dev);
    if (reasons == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = dev->supported_clock_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *reasons) {
    return nvmlDeviceGetSupportedClocksEventReasons(dev, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, unsigned int sensor, unsigned int *temp) {
    DEVICE_OR_RETURN(dev);
    if (temp == NULL || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = dev->temp;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned int version;
    unsigned int sensorType;
    int temperature;
} nvmlTemperature_v1_t;

#define NVML_TEMPERATURE_V1 ((unsigned)(sizeof(nvmlTemperature_v1_t) | (1u << 24)))

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t dev, nvmlTemperature_v1_t *t) {
    DEVICE_OR_RETURN(dev);
    if (t == NULL || t->sensorType != 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (t->version != NVML_TEMPERATURE_V1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    t->temperature = (int)dev->temp;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t dev, unsigned int threshold,
                                                      unsigned int *temp) {
    DEVICE_OR_RETURN(dev);
    if (temp == NULL || threshold >= THRESHOLDS) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->thresholds[threshold] == 0) return NVML_ERROR_NOT_SUPPORTED;
    *temp = dev->thresholds[threshold];
    return NVML_SUCCESS;
}

#define UINT_GETTER(fn, member)                                        \
    EXPORT nvmlReturn_t fn(nvmlDevice_t dev, unsigned int *out) {      \
        DEVICE_OR_RETURN(dev);                                         \
        if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;           \
        *out = dev->member;                                            \
        return NVML_SUCCESS;                                           \
    }

UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, power_enforced)
UINT_GETTER(nvmlDeviceGetPowerManagementLimit, power_limit)
UINT_GETTER(nvmlDeviceGetPowerManagementDefaultLimit, power_default)
UINT_GETTER(nvmlDeviceGetPowerUsage, power_usage)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen_curr)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, pcie_gen_max)
UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, pcie_gen_gpu_max)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, pcie_width_curr)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, pcie_width_max)
UINT_GETTER(nvmlDeviceGetPcieReplayCounter, pcie_replay)

/* What `burnin watch` samples for a stalled collective (burnin.sim.job sets a job's figures). */
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    DEVICE_OR_RETURN(dev);
    if (util == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    util->gpu = dev->utilization_gpu;
    util->memory = dev->utilization_gpu / 2;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, unsigned int type, unsigned int *clock) {
    DEVICE_OR_RETURN(dev);
    if (clock == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (type != 1) return NVML_ERROR_NOT_SUPPORTED; /* NVML_CLOCK_SM only */
    *clock = dev->clock_sm;
    return NVML_SUCCESS;
}

/* nvmlProcessInfo_v2_t / _v3: pid, usedGpuMemory, gpuInstanceId, computeInstanceId */
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } nvmlProcessInfo_t;

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count,
                                                            nvmlProcessInfo_t *infos) {
    DEVICE_OR_RETURN(dev);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    while (n < MAX_PROCS && dev->compute_pids[n] != 0) n++;
    if (*count < n || (n > 0 && infos == NULL)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        infos[i].pid = dev->compute_pids[i];
        infos[i].used = 1ULL << 30;
        infos[i].gi = 0xFFFFFFFFu;
        infos[i].ci = 0xFFFFFFFFu;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *count,
                                                            nvmlProcessInfo_t *infos) {
    return nvmlDeviceGetComputeRunningProcesses_v3(dev, count, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned int *min_mw,
                                                                 unsigned int *max_mw) {
    DEVICE_OR_RETURN(dev);
    if (min_mw == NULL || max_mw == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *min_mw = dev->power_min;
    *max_mw = dev->power_max;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- NVLink */

static nvmlReturn_t check_link(nvmlDevice_t dev, unsigned int link) {
    nvmlReturn_t rc = check_device(dev);
    if (rc != NVML_SUCCESS) return rc;
    if (dev->nvlink_count == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= dev->nvlink_count || link >= MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link, unsigned int *active) {
    nvmlReturn_t rc = check_link(dev, link);
    if (rc != NVML_SUCCESS) return rc;
    if (active == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *active = dev->nvlink_active[link] ? 1 : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t dev, unsigned int link, unsigned int *version) {
    nvmlReturn_t rc = check_link(dev, link);
    if (rc != NVML_SUCCESS) return rc;
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *version = 4; /* NVML_NVLINK_VERSION_4_0 for Hopper */
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t dev, unsigned int link, unsigned int counter,
                                                    unsigned long long *value) {
    nvmlReturn_t rc = check_link(dev, link);
    if (rc != NVML_SUCCESS) return rc;
    if (value == NULL || counter >= NVLINK_COUNTERS) return NVML_ERROR_INVALID_ARGUMENT;
    *value = dev->nvlink_err[counter][link];
    return NVML_SUCCESS;
}

/* --------------------------------------------------------------- fabric */

typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned int state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned int state;
    unsigned int healthMask;
    unsigned char healthSummary; /* v3 only */
} nvmlGpuFabricInfoV_t;

#define NVML_GPU_FABRIC_INFO_V2 0x02000024u
#define NVML_GPU_FABRIC_INFO_V3 0x03000028u

static void cluster_uuid(nvmlDevice_t dev, unsigned char out[16]) {
    memset(out, 0, 16);
    if (dev->fabric_state == 3) memcpy(out, "burnin-sim-fabrc", 16);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t dev, nvmlGpuFabricInfo_t *info) {
    DEVICE_OR_RETURN(dev);
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!dev->fabric_supported) return NVML_ERROR_NOT_SUPPORTED;
    cluster_uuid(dev, info->clusterUuid);
    info->status = (nvmlReturn_t)dev->fabric_status;
    info->cliqueId = dev->fabric_clique;
    info->state = dev->fabric_state;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, nvmlGpuFabricInfoV_t *info) {
    DEVICE_OR_RETURN(dev);
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != NVML_GPU_FABRIC_INFO_V2 && info->version != NVML_GPU_FABRIC_INFO_V3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!dev->fabric_supported) return NVML_ERROR_NOT_SUPPORTED;
    cluster_uuid(dev, info->clusterUuid);
    info->status = (nvmlReturn_t)dev->fabric_status;
    info->cliqueId = dev->fabric_clique;
    info->state = dev->fabric_state;
    info->healthMask = dev->fabric_health_mask;
    if (info->version == NVML_GPU_FABRIC_INFO_V3) info->healthSummary = dev->fabric_state == 3 ? 1 : 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------- affinity */

static void cpulist_to_mask(const char *list, unsigned long *mask, unsigned int words) {
    memset(mask, 0, sizeof(unsigned long) * words);
    const unsigned bits = (unsigned)(sizeof(unsigned long) * 8);
    const char *p = list;
    while (*p) {
        char *end;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (end == p) break;
        if (*end == '-') hi = strtoul(end + 1, &end, 10);
        for (unsigned long cpu = lo; cpu <= hi; cpu++)
            if (cpu / bits < words) mask[cpu / bits] |= 1UL << (cpu % bits);
        if (*end != ',') break;
        p = end + 1;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t dev, unsigned int words, unsigned long *mask) {
    DEVICE_OR_RETURN(dev);
    if (mask == NULL || words == 0) return NVML_ERROR_INVALID_ARGUMENT;
    cpulist_to_mask(dev->cpulist, mask, words);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t dev, unsigned int words,
                                                        unsigned long *mask, unsigned int scope) {
    if (scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    return nvmlDeviceGetCpuAffinity(dev, words, mask);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t dev, unsigned int words, unsigned long *mask,
                                                unsigned int scope) {
    DEVICE_OR_RETURN(dev);
    if (mask == NULL || words == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    memset(mask, 0, sizeof(unsigned long) * words);
    if (dev->numa_node >= 0 && (unsigned)dev->numa_node < words * sizeof(unsigned long) * 8)
        mask[dev->numa_node / (sizeof(unsigned long) * 8)] |= 1UL << (dev->numa_node % (sizeof(unsigned long) * 8));
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, int *node) {
    DEVICE_OR_RETURN(dev);
    if (node == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
    *node = dev->numa_node;
    return NVML_SUCCESS;
}

/* --------------------------------------------------------- field values */

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    unsigned int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

enum { VT_UINT = 1, VT_ULL = 3 };

static unsigned long long link_total(nvmlDevice_t dev, int counter) {
    unsigned long long total = 0;
    for (unsigned l = 0; l < dev->nvlink_count && l < MAX_LINKS; l++) total += dev->nvlink_err[counter][l];
    return total;
}

static void field_value(nvmlDevice_t dev, nvmlFieldValue_t *v) {
    v->nvmlReturn = NVML_SUCCESS;
    v->valueType = VT_UINT;
    v->timestamp = 0;
    v->latencyUsec = 0;
    memset(&v->value, 0, sizeof v->value);
    switch (v->fieldId) {
    case 82: v->value.uiVal = dev->mem_temp; break;                                   /* MEMORY_TEMP */
    case 90: v->value.uiVal = dev->nvlink_count ? dev->nvlink_speed_mbps : 0; break;  /* NVLINK_SPEED_MBPS_COMMON */
    case 91: v->value.uiVal = dev->nvlink_count; break;                               /* NVLINK_LINK_COUNT */
    case 94: v->value.uiVal = dev->pcie_replay; break;                                /* PCIE_REPLAY_COUNTER */
    case 161: v->valueType = VT_ULL; v->value.ullVal = link_total(dev, 0); break;     /* NVLINK_ERROR_DL_REPLAY */
    case 162: v->valueType = VT_ULL; v->value.ullVal = link_total(dev, 1); break;     /* NVLINK_ERROR_DL_RECOVERY */
    case 163: v->valueType = VT_ULL; v->value.ullVal = link_total(dev, 2) + link_total(dev, 3); break;
    case 230: v->value.uiVal = dev->recovery_action; break;                           /* GET_GPU_RECOVERY_ACTION */
    default: v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; break;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values) {
    DEVICE_OR_RETURN(dev);
    if (values == NULL || count < 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) field_value(dev, &values[i]);
    return NVML_SUCCESS;
}

/* --------------------------------------------------------------- events */

typedef struct {
    unsigned long long mask[MAX_GPUS]; /* registered event types per GPU index */
    long offset;                       /* bytes of the event file already consumed */
    char path[4096];
} sim_event_set;

typedef sim_event_set *nvmlEventSet_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

#define EVENT_POLL_NS 20000000L /* how often a waiting set looks at the event file: 20 ms */
#define NO_EVENT (-1)

/* "<dir of $BURNIN_SIM_NVML>/nvml.events" */
static int event_file_path(char *out, size_t size) {
    const char *state = getenv("BURNIN_SIM_NVML");
    if (state == NULL || *state == '\0') return 0;
    const char *slash = strrchr(state, '/');
    size_t dir = slash == NULL ? 0 : (size_t)(slash - state) + 1;
    if (dir + sizeof "nvml.events" > size) return 0;
    memcpy(out, state, dir);
    memcpy(out + dir, "nvml.events", sizeof "nvml.events");
    return 1;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    sim_event_set *created = calloc(1, sizeof *created);
    if (created == NULL) return NVML_ERROR_UNKNOWN;
    if (!event_file_path(created->path, sizeof created->path)) {
        free(created);
        return NVML_ERROR_UNKNOWN;
    }
    created->offset = file_size(created->path); /* only events from now on */
    *set = created;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    free(set);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long *types) {
    DEVICE_OR_RETURN(dev);
    if (types == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *types = g_state.supported_events;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set) {
    DEVICE_OR_RETURN(dev);
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (g_state.supported_events == 0 || (types & ~g_state.supported_events) != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    set->mask[dev - g_state.gpus] |= types;
    return NVML_SUCCESS;
}

/* One line of the event file: the wait's return code, or NO_EVENT when the set ignores it. */
static int deliver_line(sim_event_set *set, const char *line, nvmlEventData_t *data) {
    char kind[16];
    unsigned long long a = 0, b = 0, c = 0;
    int n = sscanf(line, "%15s %llu %llu %llu", kind, &a, &b, &c);
    if (n < 2) return NO_EVENT;
    if (strcmp(kind, "error") == 0) return (int)a;
    if (a >= g_state.count || set->mask[a] == 0) return NO_EVENT;
    sim_gpu *gpu = &g_state.gpus[a];
    if (strcmp(kind, "lost") == 0) {
        gpu->lost = 1;
        return NVML_ERROR_GPU_IS_LOST;
    }
    if (strcmp(kind, "event") != 0 || n < 3 || (set->mask[a] & b) == 0) return NO_EVENT;
    data->device = gpu;
    data->eventType = b;
    data->eventData = n >= 4 ? c : 0;
    data->gpuInstanceId = 0xFFFFFFFFu; /* no MIG: "all instances" */
    data->computeInstanceId = 0xFFFFFFFFu;
    return NVML_SUCCESS;
}

/* The next event for this set from the file, or NO_EVENT; consumes only whole lines. */
static int next_event(sim_event_set *set, nvmlEventData_t *data) {
    long size = file_size(set->path);
    if (size < set->offset) set->offset = size; /* replaced or truncated: nothing old is new */
    if (size == set->offset) return NO_EVENT;
    FILE *fh = fopen(set->path, "r");
    if (fh == NULL) return NO_EVENT;
    int rc = NO_EVENT;
    char line[512];
    if (fseek(fh, set->offset, SEEK_SET) == 0) {
        while (rc == NO_EVENT && fgets(line, sizeof line, fh) != NULL) {
            size_t len = strlen(line);
            if (len == 0 || line[len - 1] != '\n') break; /* being written: read it next time */
            set->offset += (long)len;
            rc = deliver_line(set, line, data);
        }
    }
    fclose(fh);
    return rc;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    if (set == NULL || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    long long deadline = now_ns() + (long long)timeoutms * 1000000LL;
    for (;;) {
        if (!initialized()) return NVML_ERROR_UNINITIALIZED;
        int rc = next_event(set, data);
        if (rc != NO_EVENT) return (nvmlReturn_t)rc;
        long long left = deadline - now_ns();
        if (left <= 0) return NVML_ERROR_TIMEOUT;
        struct timespec pause = {0, left < EVENT_POLL_NS ? (long)left : EVENT_POLL_NS};
        nanosleep(&pause, NULL);
    }
}

EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return nvmlEventSetWait_v2(set, data, timeoutms);
}
