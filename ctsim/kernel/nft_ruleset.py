"""kube-proxy's ``kube-proxy`` table as ``nft -f`` takes it, in each layout ``ctsim.core.nft_layout`` counts.

Written the way kube-proxy's nftables proxier writes its transaction
(``pkg/proxy/nftables/proxier.go`` at kubernetes b0f823e6): the table and
its base chains (``setupNFTables``, :394-434 and :457-717), the ``services``
chain's ``service-ips`` vmap, a ``service-HASH-ns/name/tcp/port`` chain per
Service whose last rule is ``numgen random mod N vmap { 0 : goto
endpoint-..., ... }`` (``writeServiceToEndpointRules``, :1845-1891), and an
``endpoint-HASH-...__IP/port`` chain per endpoint (hairpin masquerade, then
``dnat to``, :1707-1745). Chain names carry ``hashAndTruncate``'s prefix
(:959-967: base32 of SHA-256, 8 characters), so their lengths, and what the
kernel compares, are kube-proxy's.

ClusterIP Services only, Cluster traffic policy, detect-local by cluster
CIDR: the objects that dominate a large cluster's load.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from collections.abc import Iterator

from ctsim.core.nft_layout import EndpointMix, Layout

TABLE = "kube-proxy"
FAMILY = "ip"
MASQ_MARK = "0x00004000"  # 1 << masqueradeBit 14
CLUSTER_CIDR = "10.244.0.0/16"  # the pods (detect-local)
SERVICE_BASE = int(ipaddress.IPv4Address("10.96.0.0"))  # Services' ClusterIPs
ENDPOINT_BASE = int(ipaddress.IPv4Address("10.128.0.0"))  # endpoints: a /9 of pod addresses
PORT = 80

BASE_CHAINS = (  # nftablesBaseChains: name, type, hook, priority (dstnat -100 and srcnat 100, as numbers)
    ("filter-prerouting", "filter", "prerouting", "-110"),
    ("filter-input", "filter", "input", "-110"),
    ("filter-forward", "filter", "forward", "-110"),
    ("filter-output", "filter", "output", "-110"),
    ("filter-output-post-dnat", "filter", "output", "-90"),
    ("nat-prerouting", "nat", "prerouting", "-100"),
    ("nat-output", "nat", "output", "-100"),
    ("nat-postrouting", "nat", "postrouting", "100"),
)
JUMPS = (  # nftablesJumpChains: target, from, match
    ("nodeport-endpoints-check", "filter-input", "ct state new"),
    ("service-endpoints-check", "filter-input", "ct state new"),
    ("service-endpoints-check", "filter-forward", "ct state new"),
    ("service-endpoints-check", "filter-output", "ct state new"),
    ("firewall-check", "filter-prerouting", "ct state new"),
    ("firewall-check", "filter-output", "ct state new"),
    ("services", "nat-output", ""),
    ("services", "nat-prerouting", ""),
    ("masquerading", "nat-postrouting", ""),
    ("cluster-ips-check", "filter-forward", "ct state new"),
    ("cluster-ips-check", "filter-output-post-dnat", "ct state new"),
)
NO_LOCALHOST = "ip daddr != 127.0.0.0/8"
VERDICT_MAP = "ipv4_addr . inet_proto . inet_service : verdict"


def hash_and_truncate(name: str) -> str:
    """kube-proxy's ``hashAndTruncate``: 8 base32 characters of the name's SHA-256, a dash, the name."""
    encoded = base64.b32encode(hashlib.sha256(name.encode()).digest()).decode()
    return f"{encoded[:8]}-{name}"


def _ip(base: int, i: int) -> str:
    return str(ipaddress.IPv4Address(base + i))


class Service:
    """One Service port as the proxier names it: ``ns-K/svc-I``, port ``p80``, its ClusterIP and endpoints."""

    __slots__ = ("cluster_ip", "endpoints", "name")

    def __init__(self, index: int, endpoints: list[str]) -> None:
        self.name = f"ns-{index % 100}/svc-{index}/tcp/p{PORT}"
        self.cluster_ip = _ip(SERVICE_BASE, index + 1)
        self.endpoints = endpoints

    @property
    def chain(self) -> str:
        return "service-" + hash_and_truncate(self.name)

    def endpoint_chain(self, ip: str) -> str:
        return "endpoint-" + hash_and_truncate(f"{self.name}__{ip}/{PORT}")


def services(count: int, mix: EndpointMix, first: int = 0) -> list[Service]:
    """``count`` Services from index ``first``, their endpoint counts as ``mix`` splits them."""
    out: list[Service] = []
    index, endpoint = first, first * 16
    for per, n in mix.split(count):
        for _ in range(n):
            out.append(Service(index, [_ip(ENDPOINT_BASE, endpoint + k) for k in range(per)]))
            index += 1
            endpoint += per
    return out


def _t(what: str) -> str:
    return f"{what} {FAMILY} {TABLE}"


def base() -> Iterator[str]:
    """``setupNFTables``: the table, its base and top-level chains, sets, maps and their fixed rules."""
    yield f'add table {FAMILY} {TABLE} {{ comment "rules for kube-proxy" ; }}'
    for name, kind, hook, priority in BASE_CHAINS:
        yield f"{_t('add chain')} {name} {{ type {kind} hook {hook} priority {priority} ; }}"
    for chain in dict.fromkeys(
        [j[0] for j in JUMPS] + ["services", "cluster-ips-check", "masquerading", "mark-for-masquerade",
                                 "reject-chain"]
    ):  # fmt: skip
        yield f"{_t('add chain')} {chain}"
    for target, source, match in JUMPS:
        yield f"{_t('add rule')} {source} {match} jump {target}".replace("  ", " ")
    yield f"{_t('add rule')} mark-for-masquerade mark set mark or {MASQ_MARK}"
    yield f"{_t('add rule')} masquerading mark and {MASQ_MARK} == 0 return"
    yield f"{_t('add rule')} masquerading mark set mark xor {MASQ_MARK}"
    yield f"{_t('add rule')} masquerading masquerade fully-random"
    yield f'{_t("add set")} cluster-ips {{ type ipv4_addr ; comment "Active ClusterIPs" ; }}'
    yield f"{_t('add rule')} cluster-ips-check ip daddr @cluster-ips reject"
    yield f"{_t('add rule')} reject-chain reject"
    for name, kind in (
        ("no-endpoint-services", VERDICT_MAP),
        ("no-endpoint-nodeports", "inet_proto . inet_service : verdict"),
        ("firewall-ips", VERDICT_MAP),
        ("service-ips", VERDICT_MAP),
        ("service-nodeports", "inet_proto . inet_service : verdict"),
    ):
        yield f"{_t('add map')} {name} {{ type {kind} ; }}"
    yield f"{_t('add rule')} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services"
    yield f"{_t('add rule')} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips"
    yield f"{_t('add rule')} services ip daddr . meta l4proto . th dport vmap @service-ips"
    # --nodeport-addresses unset (MatchAll): no nodeport-ips set, the node's local addresses instead
    nodeports = f"{NO_LOCALHOST} meta l4proto . th dport vmap"
    yield f"{_t('add rule')} nodeport-endpoints-check {nodeports} @no-endpoint-nodeports"
    yield f"{_t('add rule')} services fib daddr type local {nodeports} @service-nodeports"


def dispatch_base(counts: list[int]) -> Iterator[str]:
    """PR #140362: the shared @endpoints map and one ``dispatch-N`` chain per endpoint count in use."""
    yield (
        f"{_t('add map')} endpoints {{ type ipv4_addr . inet_proto . inet_service . mark : "
        f"ipv4_addr . inet_service ; }}"
    )
    for n in sorted(set(counts)):
        yield f"{_t('add chain')} dispatch-{n}"
        yield (
            f"{_t('add rule')} dispatch-{n} ct mark set numgen random mod {n} "
            f"dnat ip addr . port to ip daddr . meta l4proto . th dport . ct mark map @endpoints"
        )


def service(layout: Layout, svc: Service) -> Iterator[str]:
    """One Service as ``syncProxyRules`` writes it in ``layout``: what a partial sync sends for it."""
    ip = svc.cluster_ip
    yield f"{_t('add element')} cluster-ips {{ {ip} }}"
    masq = f"ip daddr {ip} tcp dport {PORT} ip saddr != {CLUSTER_CIDR} jump mark-for-masquerade"
    if layout is Layout.DISPATCH:
        n = len(svc.endpoints)
        yield f"{_t('add element')} service-ips {{ {ip} . tcp . {PORT} : goto dispatch-{n} }}"
        rows = ", ".join(f"{ip} . tcp . {PORT} . {k} : {ep} . {PORT}" for k, ep in enumerate(svc.endpoints))
        yield f"{_t('add element')} endpoints {{ {rows} }}"
        return
    chain = svc.chain
    yield f"{_t('add chain')} {chain}"
    yield f"{_t('flush chain')} {chain}"
    yield f"{_t('add rule')} {chain} {masq}"
    if layout is Layout.STOPGAP and len(svc.endpoints) == 1:
        ep = svc.endpoints[0]
        yield f"{_t('add rule')} {chain} ip saddr {ep} jump mark-for-masquerade"
        yield f"{_t('add rule')} {chain} meta l4proto tcp dnat to {ep}:{PORT}"
    else:
        entries = []
        for k, ep in enumerate(svc.endpoints):
            ep_chain = svc.endpoint_chain(ep)
            yield f"{_t('add chain')} {ep_chain}"
            yield f"{_t('flush chain')} {ep_chain}"
            yield f"{_t('add rule')} {ep_chain} ip saddr {ep} jump mark-for-masquerade"
            yield f"{_t('add rule')} {ep_chain} meta l4proto tcp dnat to {ep}:{PORT}"
            entries.append(f"{k} : goto {ep_chain}")
        yield f"{_t('add rule')} {chain} numgen random mod {len(svc.endpoints)} vmap {{ {' , '.join(entries)} }}"
    yield f"{_t('add element')} service-ips {{ {ip} . tcp . {PORT} : goto {chain} }}"


def full(layout: Layout, count: int, mix: EndpointMix) -> str:
    """A full sync's transaction, from an empty table: the script ``nft -f`` loads."""
    svcs = services(count, mix)
    lines = list(base())
    if layout is Layout.DISPATCH:
        lines.extend(dispatch_base([c for c, n in mix.split(count) if n]))
    for svc in svcs:
        lines.extend(service(layout, svc))
    return "\n".join(lines) + "\n"


def partial(layout: Layout, index: int, endpoints: int) -> str:
    """A partial sync's transaction: one new Service (index ``index``) on a loaded table."""
    return "\n".join(service(layout, services(1, EndpointMix.every(endpoints), first=index)[0])) + "\n"
