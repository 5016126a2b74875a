"""MRC testbed: emulated multi-plane fabrics on Linux namespaces (Mininet API).

Modules:
  plan     -- pure address / uSID / route plan for every shape (no root, no Mininet)
  config   -- turns a plan into per-node shell scripts (sysctl, ip -batch, ethtool)
  fabric   -- builds a plan with Mininet, runs commands, flaps links, cleans up
  capture  -- per-interface tcpdump captures with nanosecond timestamps
  pcap     -- minimal pcap reader and IPv6 / SRv6 field decoder for tests
  procs    -- process / namespace bookkeeping used by the cleanup checks
  traffic  -- small UDP and SRv6 senders/receivers run inside the namespaces
"""

__version__ = "0.1.0"
