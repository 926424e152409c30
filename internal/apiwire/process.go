package apiwire

import "encoding/json"

// Process is one row of GET /api/v1/processes.
type Process struct {
	PID        int      `json:"pid"`
	PPID       int      `json:"ppid"`
	UID        int      `json:"uid"`
	Name       string   `json:"name"`
	Cmdline    []string `json:"cmdline"`
	State      string   `json:"state"`
	StartTime  int64    `json:"start_time"`
	Threads    int      `json:"threads"`
	CPUUser    float64  `json:"cpu_user"`
	CPUSystem  float64  `json:"cpu_system"`
	CPUPercent float64  `json:"cpu_percent"`
	RSS        uint64   `json:"rss"`
	VSZ        uint64   `json:"vsz"`
	Swap       uint64   `json:"swap"`
	ReadBytes  uint64   `json:"read_bytes"`
	WriteBytes uint64   `json:"write_bytes"`
	Cgroup     string   `json:"cgroup"`
	AppName    string   `json:"appname,omitempty"`
	Metrics    bool     `json:"metrics"`
}

// ProcessFields are the keys of a Process row, in the order it is written: what fields= of
// /api/v1/processes may name.
var ProcessFields = []string{"pid", "ppid", "uid", "name", "cmdline", "state", "start_time",
	"threads", "cpu_user", "cpu_system", "cpu_percent", "rss", "vsz", "swap", "read_bytes",
	"write_bytes", "cgroup", "appname", "metrics"}

// ProcessesAnswer is the answer of GET /api/v1/processes: the rows asked for and how many
// processes the caller may see in all.
//
// Fields, when not nil (fields=), keeps only those keys of each row (each one of
// ProcessFields): such rows are written with the keys in alphabetical order, and a client
// decodes them into Process rows whose other members are zero.
type ProcessesAnswer struct {
	Processes []Process `json:"processes"`
	Total     int       `json:"total"`
	Fields    []string  `json:"-"`
}

// MarshalJSON implements json.Marshaler.
func (a ProcessesAnswer) MarshalJSON() ([]byte, error) {
	type whole struct {
		Processes []Process `json:"processes"`
		Total     int       `json:"total"`
	}
	if a.Fields == nil {
		return json.Marshal(whole{a.Processes, a.Total})
	}
	rows := make([]map[string]any, len(a.Processes))
	for i := range a.Processes {
		p := &a.Processes[i]
		m := make(map[string]any, len(a.Fields))
		for _, f := range a.Fields {
			m[f] = p.field(f)
		}
		rows[i] = m
	}
	return json.Marshal(struct {
		Processes []map[string]any `json:"processes"`
		Total     int              `json:"total"`
	}{rows, a.Total})
}

// field is the value of the row's key f (one of ProcessFields; nil for any other).
func (p *Process) field(f string) any {
	switch f {
	case "pid":
		return p.PID
	case "ppid":
		return p.PPID
	case "uid":
		return p.UID
	case "name":
		return p.Name
	case "cmdline":
		return p.Cmdline
	case "state":
		return p.State
	case "start_time":
		return p.StartTime
	case "threads":
		return p.Threads
	case "cpu_user":
		return p.CPUUser
	case "cpu_system":
		return p.CPUSystem
	case "cpu_percent":
		return p.CPUPercent
	case "rss":
		return p.RSS
	case "vsz":
		return p.VSZ
	case "swap":
		return p.Swap
	case "read_bytes":
		return p.ReadBytes
	case "write_bytes":
		return p.WriteBytes
	case "cgroup":
		return p.Cgroup
	case "appname":
		return p.AppName
	case "metrics":
		return p.Metrics
	}
	return nil
}
