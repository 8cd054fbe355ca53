--- `:checkhealth agent-server`: the plugin's name as users type it (its Lua modules are
--- `agent_server`, which `:checkhealth agent_server` finds): the same checks.
---
--- Must never: check anything itself, or run the checks twice in one `:checkhealth` that names both.
return {
  check = function()
    require("agent_server.health").check_once("agent-server")
  end,
}
