package acl

import (
	"fmt"
	"net"
	"strings"
)

// MinKeyLength is the shortest access or secret key accepted (RocketMQ's).
const MinKeyLength = 6

// Config is a plain_acl.yml file: RocketMQ ACL 1.0's format.
//
//	globalWhiteRemoteAddresses:   # requests from these pass unchecked
//	  - 10.10.103.*
//	accounts:
//	  - accessKey: RocketMQ
//	    secretKey: 12345678
//	    whiteRemoteAddress: 192.168.0.*   # this key passes unsigned from here
//	    admin: false
//	    defaultTopicPerm: DENY
//	    defaultGroupPerm: SUB
//	    topicPerms:
//	      - topicA=DENY
//	      - topicB=PUB|SUB
//	    groupPerms:
//	      - groupA=SUB
type Config struct {
	// GlobalWhiteRemoteAddresses: requests from a matching IP pass with no
	// key, signature or permission check.
	GlobalWhiteRemoteAddresses []string
	// Accounts by access key.
	Accounts map[string]*Account
}

// Account is one access key's secret and permissions.
type Account struct {
	AccessKey string
	SecretKey string
	// WhiteRemoteAddress: a request naming this access key from a matching
	// IP passes without its signature or permissions being checked
	// (RocketMQ's meaning). Empty matches nobody.
	WhiteRemoteAddress string
	// Admin may use the admin request codes and, without per-resource
	// entries, every topic and group.
	Admin bool
	// DefaultTopicPerm and DefaultGroupPerm apply to topics and groups
	// without an entry. Default DENY.
	DefaultTopicPerm Perm
	DefaultGroupPerm Perm
	// TopicPerms and GroupPerms by name.
	TopicPerms map[string]Perm
	GroupPerms map[string]Perm

	white addrMatcher
}

// compiled is a Config ready to check requests.
type compiled struct {
	global   []addrMatcher
	accounts map[string]*Account
}

func (c *compiled) globallyWhite(ip net.IP) bool {
	if ip == nil {
		return false
	}
	for _, m := range c.global {
		if m(ip) {
			return true
		}
	}
	return false
}

// ParseConfig reads a plain_acl.yml document. Unknown keys are errors, so a
// misspelt permission cannot silently fall back to the default.
func ParseConfig(data []byte) (*Config, error) {
	doc, err := parseYAML(data)
	if err != nil {
		return nil, err
	}
	top, ok := doc.(map[string]any)
	if !ok && doc != nil {
		return nil, fmt.Errorf("the ACL file is not a mapping of globalWhiteRemoteAddresses and accounts")
	}
	cfg := &Config{Accounts: map[string]*Account{}}
	for key, v := range top {
		switch key {
		case "globalWhiteRemoteAddresses":
			if cfg.GlobalWhiteRemoteAddresses, err = stringList(key, v); err != nil {
				return nil, err
			}
		case "accounts":
			items, ok := v.([]any)
			if !ok && v != nil {
				return nil, fmt.Errorf("accounts: want a list of accounts")
			}
			for i, item := range items {
				a, err := parseAccount(item)
				if err != nil {
					return nil, fmt.Errorf("accounts[%d]: %w", i, err)
				}
				if _, dup := cfg.Accounts[a.AccessKey]; dup {
					return nil, fmt.Errorf("accounts[%d]: accessKey %q appears twice", i, a.AccessKey)
				}
				cfg.Accounts[a.AccessKey] = a
			}
		case "dataVersion":
			// RocketMQ 5 keeps its own version counter here; not used.
		default:
			return nil, fmt.Errorf("unknown key %q (want globalWhiteRemoteAddresses, accounts)", key)
		}
	}
	return cfg, nil
}

func parseAccount(item any) (*Account, error) {
	m, ok := item.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a mapping with accessKey, secretKey, …")
	}
	a := &Account{DefaultTopicPerm: Deny, DefaultGroupPerm: Deny, TopicPerms: map[string]Perm{}, GroupPerms: map[string]Perm{}}
	for key, v := range m {
		s, isString := v.(string)
		if v != nil && !isString && key != "topicPerms" && key != "groupPerms" {
			return nil, fmt.Errorf("%s: want a single value", key)
		}
		var err error
		switch key {
		case "accessKey":
			a.AccessKey = s
		case "secretKey":
			a.SecretKey = s
		case "whiteRemoteAddress":
			a.WhiteRemoteAddress = s
		case "admin":
			switch strings.ToLower(s) {
			case "true":
				a.Admin = true
			case "false", "":
			default:
				return nil, fmt.Errorf("admin: %q is not true or false", s)
			}
		case "defaultTopicPerm":
			a.DefaultTopicPerm, err = ParsePerm(s)
		case "defaultGroupPerm":
			a.DefaultGroupPerm, err = ParsePerm(s)
		case "topicPerms":
			a.TopicPerms, err = permList(key, v)
		case "groupPerms":
			a.GroupPerms, err = permList(key, v)
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	switch {
	case len(a.AccessKey) < MinKeyLength:
		return nil, fmt.Errorf("accessKey %q is shorter than %d characters", a.AccessKey, MinKeyLength)
	case len(a.SecretKey) < MinKeyLength:
		return nil, fmt.Errorf("secretKey of %q is shorter than %d characters", a.AccessKey, MinKeyLength)
	}
	white, err := parseAddrPattern(a.WhiteRemoteAddress)
	if err != nil {
		return nil, err
	}
	a.white = white
	return a, nil
}

func stringList(key string, v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list", key)
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%s: every item must be a single value", key)
		}
		out = append(out, s)
	}
	return out, nil
}

// permList reads "name=PERM" items.
func permList(key string, v any) (map[string]Perm, error) {
	items, err := stringList(key, v)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Perm, len(items))
	for _, item := range items {
		name, perm, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not name=PERM", item)
		}
		p, err := ParsePerm(perm)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

// compile makes cfg ready for checks.
func (cfg *Config) compile() (*compiled, error) {
	c := &compiled{accounts: cfg.Accounts}
	for _, s := range cfg.GlobalWhiteRemoteAddresses {
		m, err := parseAddrPattern(s)
		if err != nil {
			return nil, fmt.Errorf("globalWhiteRemoteAddresses: %w", err)
		}
		c.global = append(c.global, m)
	}
	for _, a := range c.accounts {
		if a.white == nil {
			m, err := parseAddrPattern(a.WhiteRemoteAddress)
			if err != nil {
				return nil, err
			}
			a.white = m
		}
	}
	return c, nil
}
