// Module apidiff pins golang.org/x/exp's apidiff, which `make lint` runs through scripts/apidiff.sh to
// check the public packages (pkg/...) against the previous release tag; nothing imports it.
module github.com/regionsync/regionsync/hack/tools/apidiff

go 1.26.0

require golang.org/x/exp v0.0.0-20261014143641-f0251eb4aa3e

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
