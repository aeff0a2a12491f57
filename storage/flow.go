package storage

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/flowctl"
)

const (
	bucketRateLog  = "ratelog"
	bucketFlowKeys = "flowkeys"
)

// FlowKeySettings is what an operator set on a flow-control key: pause and pins.
type FlowKeySettings struct {
	Paused bool         `json:"paused,omitempty"`
	Pins   flowctl.Pins `json:"pins,omitempty"`
}

func rateKey(key string, startNs int64) []byte {
	k := make([]byte, len(key)+1+8)
	copy(k, key)
	binary.BigEndian.PutUint64(k[len(key)+1:], uint64(startNs))
	return k
}

// AppendRateStart records a start of a rate-limited delivery under key and forgets the
// key's starts older than startNs-periodNs, which can no longer count.
func (t *Tx) AppendRateStart(project, key string, startNs, periodNs int64) error {
	b, err := t.writeBucket(project, bucketRateLog)
	if err != nil {
		return err
	}
	if err := b.Put(rateKey(key, startNs), nil); err != nil {
		return err
	}
	prefix := append([]byte(key), 0)
	cutoff := rateKey(key, startNs-periodNs)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix) && string(k) <= string(cutoff); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// RateStarts returns every key's recorded starts (unix ns, oldest first).
func (t *Tx) RateStarts(project string) (map[string][]int64, error) {
	out := map[string][]int64{}
	b := t.bucket(project, bucketRateLog)
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, _ []byte) error {
		if len(k) < 9 {
			return fmt.Errorf("rate log: short key %x: %w", k, ErrCorrupt)
		}
		key := string(k[:len(k)-9])
		out[key] = append(out[key], int64(binary.BigEndian.Uint64(k[len(k)-8:])))
		return nil
	})
	return out, err
}

// ResetRate forgets a key's starts.
func (t *Tx) ResetRate(project, key string) error {
	b, err := t.writeBucket(project, bucketRateLog)
	if err != nil {
		return err
	}
	prefix := append([]byte(key), 0)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// PutFlowKey stores a key's settings; zero settings delete the record.
func (t *Tx) PutFlowKey(project, key string, s FlowKeySettings) error {
	b, err := t.writeBucket(project, bucketFlowKeys)
	if err != nil {
		return err
	}
	if s == (FlowKeySettings{}) {
		return b.Delete([]byte(key))
	}
	return put(b, key, s)
}

// FlowKeys returns the settings of every key that has some.
func (t *Tx) FlowKeys(project string) (map[string]FlowKeySettings, error) {
	out := map[string]FlowKeySettings{}
	b := t.bucket(project, bucketFlowKeys)
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		var s FlowKeySettings
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("flow key %s: %w", k, err)
		}
		out[string(k)] = s
		return nil
	})
	return out, err
}
