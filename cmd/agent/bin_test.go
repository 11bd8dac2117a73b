package main_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// agentBin is the agent binary the tests run, built once by TestMain (the unit tests check its
// flags and configuration errors; the integration tests run it as processes).
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "regionsync-agent-bin-")
	if err != nil {
		panic(err)
	}
	if agentBin, err = testenv.BuildAgent(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
