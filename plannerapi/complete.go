package plannerapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/planexec/planexec/llm"
)

// complete serves an ordinary completion: the model's answer to the
// conversation, whole or as one streamed delta. The images of user
// messages go to the model with their text.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, req *chatRequest, model llm.Model) {
	if len(req.Tools) > 0 {
		badRequest("tools", "Tools are served in planner mode: set \"planner_mode\": true.").write(w)
		return
	}
	lr := &llm.Request{Temperature: req.Temperature}
	if req.MaxCompletionTokens != nil {
		lr.MaxTokens = int(*req.MaxCompletionTokens)
	} else if req.MaxTokens != nil {
		lr.MaxTokens = int(*req.MaxTokens)
	}
	var system []string
	for _, m := range req.Messages {
		text, _ := m.text()
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "user":
			lr.Messages = append(lr.Messages, llm.Message{Role: llm.RoleUser, Content: text, Images: m.images})
		case "assistant":
			lr.Messages = append(lr.Messages, llm.Message{Role: llm.RoleAssistant, Content: text})
		default:
			badRequest("messages", "Tool messages are served in planner mode.").write(w)
			return
		}
	}
	lr.System = strings.Join(system, "\n\n")
	if len(req.ResponseFormat) > 0 {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Schema      json.RawMessage `json:"schema"`
				Strict      bool            `json:"strict"`
			} `json:"json_schema"`
		}
		if json.Unmarshal(req.ResponseFormat, &rf) != nil {
			badRequest("response_format", "Invalid response_format.").write(w)
			return
		}
		if rf.Type == "json_schema" {
			lr.Output = &llm.OutputSchema{Name: rf.JSONSchema.Name, Description: rf.JSONSchema.Description, Schema: rf.JSONSchema.Schema, Strict: rf.JSONSchema.Strict}
		}
	}
	resp, err := model.Generate(r.Context(), lr)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) && pe.Status >= 400 && pe.Status < 600 {
			writeError(w, http.StatusBadGateway, "server_error", "", "upstream_error", "The model's provider failed.")
			return
		}
		writeError(w, http.StatusBadGateway, "server_error", "", "upstream_error", "The model failed.")
		return
	}
	out := newResponder(w, req, s.cfg.Now(), s.cfg.WriteTimeout, nil)
	finish := "stop"
	if resp.FinishReason == "length" {
		finish = "length"
	}
	out.answer(resp.Content, nil, finish, resp.Usage, nil)
}
