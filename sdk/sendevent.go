package sdk

import (
	"fmt"
	"strconv"
)

// SendEvent publishes events (POST /events) as the step name and returns their ids. The
// step records the ids: a replay returns them and sends nothing again. An event without
// a DedupeID is sent with one made of the run id, the step and the event's index, so a
// step retried because its result was lost (a crash after the send) sends nothing twice
// either, within the server's 24 h dedupe window: the server answers the first send's id.
func SendEvent(c *Context, name string, events ...Event) ([]string, error) {
	if len(events) == 0 {
		return nil, errEmpty("SendEvent", "an event")
	}
	return Run(c, name, func() ([]string, error) {
		step := c.next - 1 // the id Run took for this step
		out := make([]Event, len(events))
		for i, e := range events {
			if e.DedupeID == "" {
				e.DedupeID = "step:" + c.RunID + ":" + strconv.Itoa(step) + ":" + strconv.Itoa(i)
			}
			out[i] = e
		}
		res, err := c.h.client.SendEvents(c.requestContext(), out)
		if err != nil {
			return nil, fmt.Errorf("step %q: %w", name, err)
		}
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.ID
		}
		return ids, nil
	})
}
