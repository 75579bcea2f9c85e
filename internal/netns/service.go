package netns

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
)

// serviceCut is one directed cut of a single TCP service: IDC from can no
// longer reach to.
type serviceCut struct {
	from int
	to   netip.AddrPort
}

// Preferences of service cuts, below the shaping's 100 and above the IDC
// cuts' 1..MaxIDCs.
const (
	firstServicePreference = MaxIDCs + 1
	lastServicePreference  = 99
)

func addrFrom4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

// IDCOf returns the IDC an address of the topology belongs to (198.18.n.x
// is IDC n), or 0 if it is not one.
func IDCOf(a netip.Addr) int {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	if b[0] != 198 || b[1] != 18 {
		return 0
	}
	return int(b[2])
}

// CutService drops TCP packets from IDC from to one service, an address and
// port in another IDC: the service becomes unreachable from there while
// everything else of its IDC stays reachable (the drill's ns-split). The
// match assumes IPv4 headers without options, which Linux TCP never sends.
func (t *Topology) CutService(ctx context.Context, from int, to netip.AddrPort) error {
	n := IDCOf(to.Addr())
	if err := t.checkPair(from, n); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("netns: topology %s is closed", t.runTag)
	}
	c := serviceCut{from, to}
	if _, ok := t.serviceCuts[c]; ok {
		return nil
	}
	pref := t.nextServicePreference
	if pref > lastServicePreference {
		return fmt.Errorf("netns: more than %d service cuts", lastServicePreference-firstServicePreference+1)
	}
	if err := run(ctx, "tc", "-n", t.BridgeNamespace(), "filter", "add", "dev", port(n), "parent", "1:",
		"protocol", "ip", "pref", strconv.Itoa(pref), "u32",
		"match", "ip", "src", srcPrefix(from),
		"match", "ip", "dst", to.Addr().String()+"/32",
		"match", "ip", "protocol", "6", "0xff",
		"match", "ip", "dport", strconv.Itoa(int(to.Port())), "0xffff",
		"flowid", dropClass); err != nil {
		return err
	}
	t.nextServicePreference++
	t.serviceCuts[c] = pref
	t.log.Info("netns: service cut", "from", from, "to", to)
	return nil
}

// healServicesLocked removes every service cut; caller holds mu.
func (t *Topology) healServicesLocked(ctx context.Context) error {
	for c, pref := range t.serviceCuts {
		if err := run(ctx, "tc", "-n", t.BridgeNamespace(), "filter", "del", "dev", port(IDCOf(c.to.Addr())),
			"parent", "1:", "protocol", "ip", "pref", strconv.Itoa(pref)); err != nil {
			return err
		}
		delete(t.serviceCuts, c)
		t.log.Info("netns: service healed", "from", c.from, "to", c.to)
	}
	t.nextServicePreference = firstServicePreference
	return nil
}
