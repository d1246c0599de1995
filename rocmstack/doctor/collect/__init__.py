"""What the doctor collects for its checks to judge: the snapshot, the level-2 active probes, the burn-in
and, across a Ray cluster, every node's report and the cross-node collectives. rocmstack.doctor.collect
.collectors says which collector provides which of the checks' ``needs``."""
