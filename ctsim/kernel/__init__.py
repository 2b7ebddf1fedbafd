"""What needs the real kernel (and root): BPF maps, network namespaces, and what is measured on them.

``bpf`` is the one ``bpf(2)`` wrapper; ``netns_conntrack`` fills a throwaway
namespace's nf_conntrack; ``calibrate`` measures walk rates; ``emulate``
runs a scenario on real maps (``emulated_node``, ``threads``) beside the
model.

May import: ``ctsim.core``, ``ctsim.inputs``, ``ctsim.sim`` (emulate runs
the model beside the kernel) and itself. Never ``ctsim.capacity`` or the
command line. ``bpf`` and ``netns_conntrack`` import nothing of ctsim, so
ctwatch can use them without the simulator.
"""
