package health

import (
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

func TestKubernetesVersion(t *testing.T) {
	cases := []struct {
		name string
		info *version.Info
		want string
	}{
		{"no answer", nil, ""},
		{"a release", &version.Info{GitVersion: "v1.36.3", Major: "1", Minor: "36"}, "v1.36.3"},
		{"a vendor build", &version.Info{GitVersion: "v1.35.2-eks-1a2b3c", Major: "1", Minor: "35+"}, "v1.35.2-eks-1a2b3c"},
		{"source build with major and minor", &version.Info{GitVersion: "v0.0.0-master+$Format:%H$", Major: "1", Minor: "36+"}, "v1.36"},
		{"source build with the emulation version only", &version.Info{GitVersion: "v0.0.0-master+$Format:%H$", EmulationMajor: "1", EmulationMinor: "36"}, "v1.36"},
		{"source build stating nothing else", &version.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, "v0.0.0-master+$Format:%H$"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KubernetesVersion(tc.info); got != tc.want {
				t.Errorf("KubernetesVersion(%+v) = %q, want %q", tc.info, got, tc.want)
			}
		})
	}
}
