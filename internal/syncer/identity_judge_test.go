package syncer

import "testing"

// TestIdentityJudge: the identity check's decision, over the record, the operator's confirmation
// and management's resourceVersion.
func TestIdentityJudge(t *testing.T) {
	const a, b = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
	for name, tc := range map[string]struct {
		observed, record, confirmed string
		rv, maxRV                   uint64
		want                        identityVerdict
	}{
		"first connection, nothing recorded":        {observed: a, rv: 10, want: identityAccepted},
		"the recorded cluster":                      {observed: a, record: a, rv: 10, maxRV: 5, want: identityAccepted},
		"another cluster than recorded":             {observed: b, record: a, rv: 10, want: identityRefused},
		"confirmed new cluster":                     {observed: b, record: a, confirmed: b, rv: 10, want: identityAccepted},
		"confirmation names another cluster":        {observed: b, record: b, confirmed: a, rv: 10, want: identityRefused},
		"confirmation without a record, mismatched": {observed: b, confirmed: a, want: identityRefused},
		"history rewound (etcd restore)":            {observed: a, record: a, rv: 5, maxRV: 10, want: identityRewound},
		"a mismatch wins over a rewind":             {observed: b, record: a, rv: 5, maxRV: 10, want: identityRefused},
		"no resourceVersion ordering known":         {observed: a, record: a, rv: 0, maxRV: 10, want: identityAccepted},
		"first resourceVersion seen":                {observed: a, record: a, rv: 3, maxRV: 0, want: identityAccepted},
	} {
		t.Run(name, func(t *testing.T) {
			got, msg := judge(tc.observed, tc.record, tc.confirmed, tc.rv, tc.maxRV)
			if got != tc.want {
				t.Fatalf("verdict %d, want %d (%s)", got, tc.want, msg)
			}
			if (got == identityAccepted) != (msg == "") {
				t.Errorf("message %q for verdict %d", msg, got)
			}
		})
	}
}
