"""The agent: prompt building, code-block parsing and (agent.loop) the interpreter loop."""
