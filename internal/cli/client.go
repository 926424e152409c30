package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxAnswer bounds how much of an agent's answer is read (a full hour of 100k series is far
// less than this in table-worthy queries; a misbehaving server must not exhaust memory).
const maxAnswer = 1 << 30

// get fetches path with the query parameters whose values are not empty and returns the body of
// a 2xx answer, all within the agent's timeout. Any other answer becomes an error carrying the agent's {"error": "..."} message.
func (a *agent) get(ctx context.Context, path string, params ...string) ([]byte, error) {
	u := *a.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		if params[i+1] != "" {
			q.Set(params[i], params[i+1])
		}
	}
	u.RawQuery = q.Encode()
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel() // after the body is read: the timeout covers the whole answer
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("query agent: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, a.explainTransport(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, a.explainTransport(err)
		}
		return nil, fmt.Errorf("read answer of %s: %w", u.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		} else if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if hint := a.explainRefusal(resp.StatusCode, msg); hint != "" {
			msg = hint
		}
		return nil, &agentError{Path: u.Path, Status: resp.Status, Msg: clean(msg)}
	}
	return body, nil
}

// agentError is an error answer of the agent.
type agentError struct {
	Path   string
	Status string
	Msg    string
}

func (e *agentError) Error() string {
	return fmt.Sprintf("agent answered %s to %s: %s", e.Status, e.Path, e.Msg)
}

// decode unmarshals an answer, naming the route in the error.
func decode(body []byte, path string, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("agent's answer to %s is not valid JSON at offset %d: %w", path, se.Offset, err)
		}
		return fmt.Errorf("agent's answer to %s has an unexpected shape: %w", path, err)
	}
	return nil
}
