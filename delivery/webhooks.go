package delivery

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Webhooks (context.createWebhook / waitForWebhook, docs/protocol.md "Waits, notify and
// webhooks").
//
// The SDK builds the webhook URL itself from guessable parts (project user id, run id,
// event id). So when a CreateWebhook step is recorded, the engine mints a secret of
// webhookSecretBytes from crypto/rand, stores it with the run and appends it to the URL's
// last segment ("…/{eventId}.{secret}") in the recorded step: the SDK reads the step's
// out from the history it is delivered, so the route function only ever sees the URL with
// the secret. The public hooks route resolves nothing but that run's WaitForWebhook of
// that event, and only with that secret.

// webhookSecretBytes is the entropy of a webhook secret (192 bits).
const webhookSecretBytes = 24

// ErrBadStep is a step object the engine cannot record as it is.
var ErrBadStep = errors.New("invalid workflow step")

// ErrHookNotFound answers every webhook call that does not resolve a webhook, whatever
// the reason (no such project, run, event, wrong secret, not a webhook wait).
var ErrHookNotFound = errors.New("webhook not found")

const stepTypeCreateWebhook = "CreateWebhook"

// mintWebhookTx gives a CreateWebhook step its secret: it is recorded for the run and the
// step's webhookUrl carries it. Other steps pass unchanged. The rewrite starts from the
// URL's last segment, so a transaction function that runs twice mints one valid secret.
func mintWebhookTx(tx *storage.Tx, run *Run, m *Message, now time.Time) error {
	if !bytes.Contains(m.Body, []byte(stepTypeCreateWebhook)) {
		return nil
	}
	var step struct {
		StepID   int     `json:"stepId"`
		StepType string  `json:"stepType"`
		Out      *string `json:"out"`
	}
	if json.Unmarshal(m.Body, &step) != nil || step.StepType != stepTypeCreateWebhook || step.StepID == 0 || step.Out == nil {
		return nil // a plan step, or not a step object
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*step.Out), &out); err != nil {
		return fmt.Errorf("%w: CreateWebhook step %d: out is not a JSON object: %v", ErrBadStep, step.StepID, err)
	}
	var hookURL, eventID string
	if json.Unmarshal(out["webhookUrl"], &hookURL) != nil || json.Unmarshal(out["eventId"], &eventID) != nil || eventID == "" || strings.ContainsAny(eventID, "./") {
		return fmt.Errorf("%w: CreateWebhook step %d: out needs webhookUrl and an eventId without '.' or '/'", ErrBadStep, step.StepID)
	}
	cut := strings.LastIndexByte(hookURL, '/')
	last := hookURL[cut+1:]
	if cut < 0 || !strings.HasSuffix(hookURL[:cut], "/"+run.ID) || (last != eventID && !strings.HasPrefix(last, eventID+".")) {
		return fmt.Errorf("%w: CreateWebhook step %d: webhookUrl must end with /%s/%s", ErrBadStep, step.StepID, run.ID, eventID)
	}
	secret := newWebhookSecret()
	if err := tx.PutWebhook(m.Project, run.ID, eventID, &storage.Webhook{Secret: secret, CreatedAt: now.UnixMilli()}); err != nil {
		return err
	}
	out["webhookUrl"] = wire.MustCompactJSON(hookURL[:cut+1] + eventID + "." + secret)
	body, err := stepWith(m.Body, map[string]any{"out": string(wire.MustCompactJSON(out))})
	if err != nil {
		return err
	}
	m.Body = body
	return nil
}

func newWebhookSecret() string {
	var b [webhookSecretBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SplitHookEvent splits the last segment of a webhook URL into the event id and secret.
func SplitHookEvent(segment string) (eventID, secret string, ok bool) {
	i := strings.LastIndexByte(segment, '.')
	if i <= 0 || i == len(segment)-1 {
		return "", "", false
	}
	return segment[:i], segment[i+1:], true
}

// CallWebhook delivers a webhook call (data, the hook event JSON) to the run's
// WaitForWebhook of eventID, or keeps it until the run waits (built-in lookback). Anything
// but a live run's webhook with this very secret is ErrHookNotFound, one answer for all.
func (e *Engine) CallWebhook(ctx context.Context, project, runID, eventID, secret string, data []byte) error {
	now := e.now()
	fx, err := update(ctx, e.store, func(tx *storage.Tx) (effects, error) {
		var fx effects
		hook, err := tx.Webhook(project, runID, eventID)
		if errors.Is(err, storage.ErrNotFound) {
			return fx, ErrHookNotFound
		}
		if err != nil {
			return fx, err
		}
		if subtle.ConstantTimeCompare([]byte(hook.Secret), []byte(secret)) != 1 {
			return fx, ErrHookNotFound
		}
		run, err := tx.Run(project, runID)
		if errors.Is(err, storage.ErrNotFound) {
			return fx, ErrHookNotFound
		}
		if err != nil {
			return fx, err
		}
		if !run.Live() {
			return fx, ErrHookNotFound
		}
		w, err := tx.Waiter(project, eventID, runID)
		if errors.Is(err, storage.ErrNotFound) {
			return fx, e.putRunEventTx(tx, project, runID, eventID, data, now)
		}
		if err != nil {
			return fx, err
		}
		if waitStepType(w.Step) != "WaitForWebhook" {
			return fx, ErrHookNotFound // a waitForEvent of the same id: only notify resolves it
		}
		timer, err := e.wf.dropWaiterTx(tx, project, w)
		if err != nil {
			return fx, err
		}
		if timer != nil {
			fx.forget = append(fx.forget, *timer)
		}
		step, err := stepWith(w.Step, map[string]any{"out": base64.StdEncoding.EncodeToString(data), "waitTimeout": false})
		if err != nil {
			return fx, err
		}
		due, err := e.wf.publishStepTx(tx, w.Template, step, now)
		if due != nil {
			fx.add = append(fx.add, *due)
		}
		return fx, err
	})
	if err != nil {
		return err
	}
	e.disp.apply(fx)
	return nil
}

func waitStepType(step []byte) string {
	var s struct {
		StepType string `json:"stepType"`
	}
	_ = json.Unmarshal(step, &s) // a step we stored; unreadable means no type
	return s.StepType
}

// putRunEventTx keeps an event for a run that does not wait for it yet, within the run's
// limits (ErrRunLimit beyond: 412).
func (e *Engine) putRunEventTx(tx *storage.Tx, project, runID, eventID string, data []byte, now time.Time) error {
	u, err := tx.RunEvents(project, runID, eventID)
	if err != nil {
		return err
	}
	if u.Count+1 > e.cfg.MaxRunEvents {
		return fmt.Errorf("%w: run %q already keeps %d events nobody waits for, the limit is %d", ErrRunLimit, runID, u.Count, e.cfg.MaxRunEvents)
	}
	if size := u.Bytes + int64(len(eventID)+len(data)); size > e.cfg.MaxRunEventBytes {
		return fmt.Errorf("%w: events kept for run %q would take %d bytes, the limit is %d", ErrRunLimit, runID, size, e.cfg.MaxRunEventBytes)
	}
	return tx.PutRunEvent(project, runID, eventID, data, now.UnixMilli())
}

// takeRunEventTx returns the event kept for a run's wait, unless it expired.
func (e *Engine) takeRunEventTx(tx *storage.Tx, project, runID, eventID string, now time.Time) ([]byte, error) {
	return tx.TakeRunEvent(project, runID, eventID, now.Add(-e.cfg.EventRetention).UnixMilli())
}

// sweepRunEventsTx expires kept events and moves those of older versions under the
// limits. It returns how many records it touched.
func (e *Engine) sweepRunEventsTx(tx *storage.Tx, project string, now time.Time, limit int) (int, error) {
	a, err := tx.DeleteExpiredRunEvents(project, now.Add(-e.cfg.EventRetention).UnixMilli(), limit)
	if err != nil {
		return a, err
	}
	b, err := tx.MigrateLegacyLookback(project, now.UnixMilli(), limit)
	return a + b, err
}
