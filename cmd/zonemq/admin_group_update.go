package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// runAdminGroupUpdate is `admin group update`: a consumer group's config on
// every live master (`mqadmin updateSubGroup`).
func runAdminGroupUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("group update", "--group G [--orderly] [--retry-max-times 16]", stderr)
	group := s.fs.String("group", "", "consumer group (required)")
	orderly := s.fs.Bool("orderly", false, "FIFO for RocketMQ 5 (POP) consumers: nothing new from a queue while one of its messages is in flight")
	retries := s.fs.Int("retry-max-times", 16, "redeliveries before the dead-letter queue")
	check := func() error {
		switch {
		case *group == "":
			return usagef("--group is required")
		case protocol.ValidateGroup(*group) != nil:
			return usagef("--group: %v", protocol.ValidateGroup(*group))
		case *retries < 1 || *retries > 64:
			return usagef("--retry-max-times must be within 1..64, got %d", *retries)
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	if err := s.admin.UpdateGroup(ctx, admin.GroupSpec{Group: *group, Orderly: *orderly, RetryMaxTimes: *retries}); err != nil {
		return fmt.Errorf("group %s: %s", *group, oneLine(err.Error()))
	}
	fmt.Fprintf(stdout, "group %s updated on every live master: orderly %t, retry max times %d\n", *group, *orderly, *retries)
	return nil
}
