package main

import (
	"flag"
	"time"
)

// netnsFlags are the drill's --netns options (docs/disaster-recovery.md,
// "Real network").
type netnsFlags struct {
	netns bool
	rtt   time.Duration
	loss  float64
}

func addNetnsFlags(fs *flag.FlagSet) *netnsFlags {
	f := &netnsFlags{}
	fs.BoolVar(&f.netns, "netns", false, "run each IDC in its own network namespace on 198.18.n.1 (needs root), and add\n"+
		"the scenarios idc-isolated, one-way and ns-split")
	fs.DurationVar(&f.rtt, "idc-rtt", 10*time.Millisecond, "with --netns: round trip between two IDCs (netem; 0 for none)")
	fs.Float64Var(&f.loss, "idc-loss", 0, "with --netns: `percent` of packets lost between IDCs (netem)")
	return f
}
