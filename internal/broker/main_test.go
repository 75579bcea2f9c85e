package broker

import (
	"os"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestMain runs the tests with a temporary home directory:
// rocketmq-client-go's broadcasting consumers keep offsets there.
func TestMain(m *testing.M) { os.Exit(testutil.RunWithTempHome(m)) }
