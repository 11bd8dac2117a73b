// Package e2e holds regionsync's end-to-end scenarios (RunScenarios, RunDistributionScenario,
// RunClusterProfileScenario, RunRolloutScenario, RunFanOutScenario, RunTraceScenario and the
// same-cluster one) and the tests that run them on a fleet from the fleet package
// (test/framework/fleet), deployed from the kustomize overlays under deploy/ exactly as
// operators deploy them: TestLocal on local control planes (make test-e2e; CI runs it) and
// TestKind on kind clusters (make test-e2e-kind, needs Docker). Every file but this one is
// behind the build tag e2e (the kind test behind e2e and kind), so go test ./... runs none.
package e2e
