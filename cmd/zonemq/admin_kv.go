package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/zonemq/zonemq/client"
)

// The name servers' KV config (RocketMQ's PUT_KV_CONFIG and friends):
// namespaced key=value pairs. Writes go to every name server of every IDC,
// since name servers share nothing; reads ask the client's nearest one.

// kvJSON is one key in `admin kv … --output json`.
type kvJSON struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

// kvFlags registers --namespace and (if withKey) --key on s.
func kvFlags(s *adminSession, withKey bool) (namespace, key *string, check func() error) {
	namespace = s.fs.String("namespace", "", "KV namespace (required)")
	key = new(string)
	if withKey {
		s.fs.StringVar(key, "key", "", "key (required)")
	}
	check = func() error {
		if *namespace == "" {
			return usagef("--namespace is required")
		}
		if withKey && *key == "" {
			return usagef("--key is required")
		}
		return nil
	}
	return namespace, key, check
}

func runAdminKVGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("kv get", "--namespace NS --key K [--output text|json]", stderr)
	ns, key, check := kvFlags(s, true)
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	value, err := s.admin.GetKV(ctx, *ns, *key)
	if err != nil {
		if isCode(err, client.CodeQueryNotFound) {
			return fmt.Errorf("no key %q in namespace %q", *key, *ns)
		}
		return fmt.Errorf("kv get: %s", oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, kvJSON{Namespace: *ns, Key: *key, Value: value})
	}
	_, err = fmt.Fprintln(stdout, value)
	return err
}

func runAdminKVPut(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("kv put", "--namespace NS --key K --value V [--output text|json]", stderr)
	ns, key, check := kvFlags(s, true)
	value := s.fs.String("value", "", "value (required; may be empty if given explicitly)")
	withValue := func() error {
		if err := check(); err != nil {
			return err
		}
		given := false
		s.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "value" })
		if !given {
			return usagef("--value is required")
		}
		return nil
	}
	if err := s.connect(ctx, args, withValue); err != nil {
		return err
	}
	defer s.close()
	if err := s.admin.PutKV(ctx, *ns, *key, *value); err != nil {
		return fmt.Errorf("kv put: %s", oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, kvJSON{Namespace: *ns, Key: *key, Value: *value})
	}
	_, err := fmt.Fprintf(stdout, "put %s/%s on every name server\n", *ns, *key)
	return err
}

func runAdminKVDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("kv delete", "--namespace NS --key K [--output text|json]", stderr)
	ns, key, check := kvFlags(s, true)
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	if err := s.admin.DeleteKV(ctx, *ns, *key); err != nil {
		return fmt.Errorf("kv delete: %s", oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, map[string]any{"namespace": *ns, "key": *key, "deleted": true})
	}
	_, err := fmt.Fprintf(stdout, "deleted %s/%s on every name server\n", *ns, *key)
	return err
}

func runAdminKVList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("kv list", "--namespace NS [--output text|json]", stderr)
	ns, _, check := kvFlags(s, false)
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	table, err := s.admin.KVList(ctx, *ns)
	if err != nil && !isCode(err, client.CodeQueryNotFound) {
		return fmt.Errorf("kv list: %s", oneLine(err.Error()))
	}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if s.json() {
		out := make([]kvJSON, 0, len(keys))
		for _, k := range keys {
			out = append(out, kvJSON{Namespace: *ns, Key: k, Value: table[k]})
		}
		return printJSON(stdout, out)
	}
	if len(keys) == 0 {
		_, err := fmt.Fprintf(stdout, "namespace %s is empty\n", *ns)
		return err
	}
	t := newTable(stdout, "KEY", "VALUE")
	for _, k := range keys {
		t.row(k, table[k])
	}
	return t.flush()
}
