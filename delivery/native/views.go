package native

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// views turns runs into their views, the live ones' status read from the engine.
func (s *Service) views(ctx context.Context, project string, runs []delivery.RunWithHistory) ([]RunView, error) {
	var live []string
	for i := range runs {
		if runs[i].Live() {
			live = append(live, runs[i].ID)
		}
	}
	acts, err := s.engine.RunActivities(ctx, project, live)
	if err != nil {
		return nil, err
	}
	out := make([]RunView, len(runs))
	for i := range runs {
		r := &runs[i]
		wf, app := nativeOf(&r.Run)
		v := RunView{RunID: r.ID, Workflow: wf, App: app, CreatedAt: r.CreatedAt, EndedAt: r.EndedAt,
			EventIDs: []string{}, Keys: runKeys(r.FlowKeys), DLQID: r.DLQID, Usage: r.AIUsage, Cap: r.AICap}
		v.Steps = recordedSteps(r.CreatedAt, r.History)
		if len(v.Steps) > 0 {
			v.StartedAt = v.Steps[0].EndedAt // the first step's result came back
		}
		if len(r.History) > 0 {
			v.EventIDs = eventIDs(r.History[0].Body)
		}
		switch r.State {
		case storage.RunSuccess:
			v.Status = StatusSucceeded
		case storage.RunFailed:
			v.Status = StatusFailed
			v.Error = r.Error
			if r.Error != nil {
				v.Steps = append(v.Steps, failedStep(r, v.Steps))
			}
		case storage.RunCanceled:
			v.Status = StatusCancelled
			v.CancelledBy = r.CancelledBy
		default:
			a, ok := acts[r.ID]
			if !ok { // ended between the two reads
				a = delivery.RunActivity{Activity: StatusRunning}
			}
			v.Status = a.Activity
			if a.Reason != "" {
				v.Waiting = &RunWaiting{Reason: a.Reason, Since: a.Since.UnixMilli()}
			}
		}
		out[i] = v
	}
	return out, nil
}

// failedStep is the step that failed run r, after its recorded steps: named by the
// failure when it was known, started when the last step before it ended.
func failedStep(r *delivery.RunWithHistory, steps []RunStep) RunStep {
	st := RunStep{ID: len(steps) + 1, Name: r.Error.Step, Status: StatusFailed, StartedAt: r.CreatedAt, EndedAt: r.EndedAt,
		Error: &StepError{Code: r.Error.Code, Message: r.Error.Message, Status: r.Error.Status}}
	if n := len(steps); n > 0 {
		st.ID, st.StartedAt = steps[n-1].ID+1, steps[n-1].EndedAt
	}
	return st
}

// recordedSteps are a run's step results in the order recorded (the initial payload,
// plan steps and call bookkeeping left out). A step started when the entry before it
// was recorded (the run's creation for the first) and ended when its own was.
func recordedSteps(created int64, history []delivery.HistoryEntry) []RunStep {
	out := []RunStep{}
	ai := map[int]*flowctl.AIUsage{} // AI usage by step id, from the calls' callbacks
	for _, e := range history {
		if e.AI != nil && e.AI.StepID > 0 {
			u := *e.AI
			u.StepID = 0
			ai[e.AI.StepID] = &u
		}
	}
	prev := created
	for i, e := range history {
		started := prev
		prev = e.CreatedAt
		if i == 0 || e.CallType != delivery.CallStep {
			continue
		}
		var st struct {
			StepID   int             `json:"stepId"`
			StepName string          `json:"stepName"`
			StepType string          `json:"stepType"`
			Out      json.RawMessage `json:"out"`
		}
		if err := json.Unmarshal(e.Body, &st); err != nil || st.StepID == 0 {
			continue
		}
		out = append(out, RunStep{ID: st.StepID, Name: st.StepName, Type: st.StepType, Status: StatusSucceeded,
			StartedAt: started, EndedAt: e.CreatedAt, Out: stepOut(st.StepType, st.Out), Usage: ai[st.StepID]})
	}
	return out
}

// stepOut is a step's out as a JSON value. On the wire out is the JSON text of the
// step's value in a string ("{\"v\":1}"), and a Wait step's is the base64 of the
// event's data: both are decoded, so an object stays an object. An out that is not JSON
// text stays the string it is; a missing or null out is left out.
func stepOut(stepType string, raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw // a value already
	}
	text := []byte(s)
	if stepType == "Wait" {
		if data, err := base64.StdEncoding.DecodeString(s); err == nil {
			text = data
		}
	}
	var buf bytes.Buffer
	if json.Valid(text) && json.Compact(&buf, text) == nil {
		return buf.Bytes()
	}
	quoted, _ := json.Marshal(string(text))
	return quoted
}

// eventIDs reads the ids of the events a run was started with from its initial payload.
func eventIDs(body []byte) []string {
	var p struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	out := []string{}
	if json.Unmarshal(body, &p) != nil {
		return out
	}
	for _, e := range p.Events {
		if e.ID != "" {
			out = append(out, e.ID)
		}
	}
	return out
}
