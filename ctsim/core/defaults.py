"""Cilium's constants in one place (like its ``pkg/defaults``), each under its v1.16.5 name.

Everything else reads them from here: the model, the kernel tools, capacity
planning and ctwatch, which imports this module without loading the
simulator. The model's own assumptions that are not Cilium's are marked so.
"""

from __future__ import annotations

from ctsim.core.maptype import FAMILIES, MapType
from ctsim.core.rate import APILimiterParameters

# Timeouts.
CLIENT_TIMEOUT = 90.0  # pkg/api ClientTimeout: cilium-cni's deadline for PUT /endpoint
TEARDOWN_TIMEOUT = 60.0  # containerd's deferred CNI DEL (not Cilium's)
CLIENT_CONNECT_TIMEOUT = 30.0  # defaults.ClientConnectTimeout: cilium-cni ADD polls the agent's GetConfig this long
CLIENT_CONNECT_POLL = 0.5  # client.NewDefaultClientWithTimeout's sleep between polls
INITIAL_SCAN_TIMEOUT = 30.0  # v1.16.0-1.16.6: bootstrap log.Fatal's past this without the initial CT scan
CRASH_LOOP_BACKOFF = 10.0  # kubelet's backOffPeriod: a crashed container's first restart delay, doubling
CRASH_LOOP_MAX_BACKOFF = 300.0  # kubelet's MaxContainerBackOff
CT_TIMEOUT_TCP_FIN = 10.0  # seconds; bpf-ct-timeout-regular-tcp-fin
CT_TIMEOUT_ANY = 60.0  # seconds; bpf-ct-timeout-regular-any: a non-TCP entry's life after its last packet
DEFAULT_REGENERATION = 2.0  # the model's assumption: seconds to compile and load an endpoint's programs

# The adaptive GC interval's bounds (pkg/defaults).
CONNTRACK_GC_STARTING_INTERVAL = 5 * 60.0  # defaults.ConntrackGCStartingInterval
CONNTRACK_GC_MIN_INTERVAL = 10.0  # defaults.ConntrackGCMinInterval
CONNTRACK_GC_MAX_LRU_INTERVAL = 12 * 3600.0  # defaults.ConntrackGCMaxLRUInterval

# Cilium's global CT maps, by family (pinned under <bpffs>/tc/globals/): the TCP map, then the non-TCP one,
# the order doGC4/doGC6 walk them in.
CT_MAPS: dict[str, tuple[str, str]] = {
    family: (MapType.of(family, True).pinned, MapType.of(family, False).pinned) for family in FAMILIES
}
FAMILY_OF_MAP: dict[str, str] = {name: family for family, names in CT_MAPS.items() for name in names}
# cilium_bpf_map_pressure's map_name label (the map's name without the "cilium_" prefix) -> pinned map name.
CILIUM_PRESSURE_MAPS: dict[str, str] = {
    name.removeprefix("cilium_"): name for names in CT_MAPS.values() for name in names
}
CT_KEY_SIZES = {"ipv4": 14, "ipv6": 38}  # struct ipv4_ct_tuple / ipv6_ct_tuple (tuple.TupleKey4Global / 6)
CT_VALUE_SIZE = 56  # struct ct_entry (CtEntry)

# Map sizes (pkg/option, pkg/defaults).
CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT = 2 << 18  # 524,288
CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT = 2 << 17  # 262,144
LIMIT_TABLE_AUTO_GLOBAL_TCP_MIN = 1 << 17
LIMIT_TABLE_AUTO_GLOBAL_ANY_MIN = 1 << 16
# A GC interval any series may plausibly report (ctsim simulates at most 400 days).
MAX_GC_INTERVAL = 400 * 86400.0
LIMIT_TABLE_MIN = 1 << 10  # 1,024: checkMapSizeLimits refuses smaller CT maps
LIMIT_TABLE_MAX = 1 << 24  # 16,777,216
DEFAULT_DYNAMIC_SIZE_RATIO = 0.0025  # the Helm chart's bpf.mapDynamicSizeRatio default

# daemon/restapi/api_limits.go, apiRateLimitDefaults (v1.16.5).
ENDPOINT_CREATE = APILimiterParameters(
    estimated_processing=2.0,
    auto_adjust=True,
    rate_limit=0.5,
    rate_burst=4,
    parallel_requests=4,
    min_parallel_requests=2,
    skip_initial=4,
    max_wait=60.0,
)
ENDPOINT_DELETE = APILimiterParameters(
    estimated_processing=0.2,
    auto_adjust=True,
    parallel_requests=4,
    min_parallel_requests=4,
)
