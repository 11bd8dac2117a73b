package config

import "errors"

// ValidateEmbedded validates a configuration that a host built in memory for the library
// (pkg/regionsync): everything Validate checks except the management kubeconfig path, which a
// host does not have (it passes a *rest.Config).
func ValidateEmbedded(c *AgentConfig) error {
	err := Validate(c)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	kept := ve.Errors[:0:0]
	for _, fe := range ve.Errors {
		if fe.Field != "management.kubeconfig" {
			kept = append(kept, fe)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return &ValidationError{Errors: kept}
}
