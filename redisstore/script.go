package redisstore

import (
	"embed"
	"strings"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// nodesSource is the node registry's heartbeat script.
//
//go:embed lua/nodes.lua
var nodesSource string

// scriptParts are joined, in this order, into the one script every decision
// runs: each algorithm file defines a local table that decide.lua uses.
var scriptParts = []string{"prelude", "fixed_window", "sliding_log", "sliding_window", "token_bucket", "decide"}

// scriptSource is the whole decision script.
var scriptSource = joinScript()

func joinScript() string {
	var b strings.Builder
	for _, name := range scriptParts {
		src, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			panic("redisstore: missing embedded script: " + err.Error()) // a build defect, not input
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

// Script returns the Lua source of the decision script, for reading or for
// trying with redis-cli.
func Script() string { return scriptSource }
