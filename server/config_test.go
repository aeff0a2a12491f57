package server

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	check := func(raw string) (*url.URL, error) { return url.Parse(raw) }

	require.NoError(t, Config{CheckDestination: check}.withDefaults().validate(), "zero fields take defaults")
	require.ErrorContains(t, Config{}.withDefaults().validate(), "Config.CheckDestination is required")

	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"MaxBodyBytes", Config{MaxBodyBytes: -1}, "Config.MaxBodyBytes must not be negative"},
		{"MaxBatchMessages", Config{MaxBatchMessages: -5}, "Config.MaxBatchMessages must not be negative (zero takes the default), got -5"},
		{"MaxRetries", Config{MaxRetries: -1}, "Config.MaxRetries"},
		{"MaxTimeout", Config{MaxTimeout: -time.Second}, "Config.MaxTimeout must not be negative (zero takes the default), got -1s"},
		{"IdleTimeout", Config{IdleTimeout: -1}, "Config.IdleTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.CheckDestination = check
			_, err := New(tt.cfg, nil)
			require.ErrorContains(t, err, tt.want)
		})
	}

	err := Config{MaxBodyBytes: -1, WriteTimeout: -1}.withDefaults().validate()
	require.ErrorContains(t, err, "CheckDestination")
	require.ErrorContains(t, err, "MaxBodyBytes")
	require.ErrorContains(t, err, "WriteTimeout", "every invalid field is named")
}
