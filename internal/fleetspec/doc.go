// Package fleetspec is the fleet's vocabulary, shared by the agent's configuration file
// (pkg/config), the library's Options (pkg/regionsync), the engine and the hub: the shard
// definition, the kinds to sync and how (strategy, adoption, fan-out), lease timings, tracing,
// the namespaces and kinds a region protects, every default, and the validation of each, one
// function per rule. Each caller names the field in its own terms (a field.Path), so an error
// reads the same from a file, from Options and from the hub's configuration.
package fleetspec
