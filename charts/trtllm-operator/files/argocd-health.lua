-- Argo CD health check for trtllm-operator's LLMEngine and LLMDeployment (same script for both kinds).
-- Install: argocd-cm resource.customizations.health.llm.trtllm-operator.dev_LLMEngine (and _LLMDeployment),
-- see docs/gitops.md. Generation-aware: nothing is Healthy until the operator has observed the
-- current spec (status.observedGeneration == metadata.generation).
local hs = {}

local function condition(t)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil then
    return c.reason
  end
  return fallback
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local incompatible = condition("EngineIncompatible")
if incompatible ~= nil and incompatible.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(incompatible, "Engine incompatible with the server")
  return hs
end

local degraded = condition("Degraded")
if obj.status.phase == "Failed" or (degraded ~= nil and degraded.status == "True") then
  hs.status = "Degraded"
  hs.message = describe(degraded, describe(condition("Ready"), "Failed"))
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Phase " .. tostring(obj.status.phase or "Pending"))
return hs
