//===- PlanReport.cpp - the plan as one page: ds-opt --plan-report FILE.html -===//
//
// One self-contained HTML page (its script and styles inline, nothing fetched) of a training
// step: each rank's device memory over one step by category, from the memory plan's own
// timeline (the arena's bytes after each op); each pipeline rank's schedule as the cost model
// simulates it; the collectives per rank and mesh axis (with the cluster's seconds); and, from
// --plan, the ranked layouts. The page draws itself from one JSON object; the numbers it shows
// are the text reports' (--memory-report, --comm-report, --plan's table).
//
//===----------------------------------------------------------------------===//
#include "ds/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::ds;
namespace json = llvm::json;

namespace {
/// At most this many points per function's curve (each the fullest op of its stretch).
constexpr size_t kPointsPerFunction = 400;

json::Array curve(const std::vector<std::array<int64_t, 2>> &timeline) {
  json::Array out;
  size_t n = timeline.size(), buckets = std::min(n, kPointsPerFunction);
  for (size_t b = 0; b < buckets; ++b) {
    size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    std::array<int64_t, 2> most = timeline[lo];
    for (size_t i = lo; i < hi; ++i)
      if (timeline[i][0] > most[0])
        most = timeline[i];
    out.push_back(json::Array{most[0], most[1]});
  }
  return out;
}

/// The memory of each program rank: every rank alike, or each pipeline stage.
json::Array memoryOf(ModuleOp step, const MemoryPlan &plan) {
  json::Array ranks;
  int64_t stages = plan.ranks.empty() ? 1 : static_cast<int64_t>(plan.ranks.size());
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttrName);
  int64_t all = mesh ? mesh.getNumRanks() : 1, perStage = all / stages;
  int64_t gas = gradientAccumulationSteps(step);
  for (int64_t r = 0; r < stages; ++r) {
    RankMemory m = rankMemory(plan, plan.ranks.empty() ? -1 : r);
    json::Array functions;
    for (const MemoryPlan::PlannedFunction &f : plan.functions()) {
      func::FuncOp fn = f.func;
      llvm::StringRef name = fn.getSymName();
      bool mine = plan.ranks.empty() || name.ends_with("_" + std::to_string(r));
      if (!mine)
        continue;
      std::string label = name.str();
      if (plan.ranks.empty() && f.microStep && gas > 1)
        label += " (each of " + std::to_string(gas) + ")";
      functions.push_back(json::Object{{"name", label},
                                       {"points", curve(plan.function(fn).timeline)}});
    }
    std::string who = stages == 1 ? "every rank (" + std::to_string(all) + ")"
                                  : "pipeline stage " + std::to_string(r) + " (" +
                                        std::to_string(perStage) + " rank" +
                                        (perStage == 1 ? "" : "s") + ")";
    ranks.push_back(json::Object{{"name", who},
                                 {"peak", m.peak},
                                 {"parameters", m.params},
                                 {"gradients", m.grads},
                                 {"optimizer", m.optim},
                                 {"buffers", m.buffers},
                                 {"activations", m.activations},
                                 {"inputs", m.inputs},
                                 {"communication", m.comm},
                                 {"functions", std::move(functions)}});
  }
  return ranks;
}

json::Array scheduleOf(ModuleOp step) {
  json::Array ranks;
  PipelineAttr info = getPipeline(step);
  if (!info || !info.isScheduled())
    return ranks;
  for (auto &rank : simulatePipeline(step, info)) {
    json::Array spans;
    for (const PipelineSpan &s : rank)
      spans.push_back(json::Object{{"s", s.start}, {"e", s.end}, {"l", s.label},
                                   {"b", s.backward}});
    ranks.push_back(std::move(spans));
  }
  return ranks;
}

json::Array commOf(ModuleOp step, const ClusterSpec *cluster) {
  json::Array out;
  PipelineAttr info = getPipeline(step);
  int64_t stages = info && info.isScheduled() ? info.getStages() : 1;
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttrName);
  for (int64_t r = 0; r < stages; ++r) {
    json::Array rows;
    for (const CommRow &row : commRows(step, r)) {
      json::Object o{{"axes", row.axes}, {"kind", row.kind}, {"calls", row.calls},
                     {"bytes", row.bytes}};
      if (cluster && mesh)
        o["seconds"] = collectiveSeconds(row.kind, row.calls, static_cast<double>(row.bytes),
                                         placementOf(mesh, row.axes, *cluster), *cluster);
      rows.push_back(std::move(o));
    }
    out.push_back(json::Object{
        {"rank", stages == 1 ? std::string("every rank") : "pipeline rank " + std::to_string(r)},
        {"rows", std::move(rows)}});
  }
  return out;
}

/// The page: styles, the data, and the script that draws it. The script records any error it
/// meets in #errors and sets #status to "rendered" when done (what the browser test reads).
constexpr const char *kHead = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ds plan</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:right;white-space:nowrap}th{background:#f4f4f4}td.l,th.l{text-align:left}
.legend span{display:inline-block;margin-right:12px}.sw{width:10px;height:10px;
display:inline-block;margin-right:4px}svg{border:1px solid #ddd;margin:4px 0}
#errors{color:#b00}
</style></head><body>
<h1 id="title"></h1><p id="summary"></p><div id="errors"></div>
<div id="memory"></div><div id="schedule"></div><div id="comm"></div><div id="candidates"></div>
<p id="status">not rendered</p>
<script>
window.onerror=function(m,s,l){document.getElementById('errors').textContent+=
 'error: '+m+' (line '+l+')\n';};
const DATA=)";

constexpr const char *kScript = R"(;
const C={parameters:'#4e79a7',gradients:'#f28e2b',optimizer:'#e15759',buffers:'#76b7b2',
 temporaries:'#59a14f',communication:'#edc948'};
const NS='http://www.w3.org/2000/svg';
function el(tag,attrs,text){const e=document.createElement(tag);for(const k in attrs||{})
 e.setAttribute(k,attrs[k]);if(text!==undefined)e.textContent=text;return e;}
function sv(tag,attrs){const e=document.createElementNS(NS,tag);for(const k in attrs)
 e.setAttribute(k,attrs[k]);return e;}
function table(parent,heads,rows,cls){const t=el('table',{class:cls||''});const h=el('tr');
 heads.forEach((x,i)=>h.appendChild(el('th',{class:i?'':'l'},x)));t.appendChild(h);
 rows.forEach(r=>{const tr=el('tr');r.forEach((x,i)=>tr.appendChild(el('td',
 {class:i?'':'l'},String(x))));t.appendChild(tr);});parent.appendChild(t);return t;}
function mib(b){return (b/1048576).toFixed(1)+' MiB';}
function drawMemory(){const box=document.getElementById('memory');
 box.appendChild(el('h2',{},'Device memory per rank over one step (the plan\'s timeline)'));
 const lg=el('div',{class:'legend'});for(const k in C){const s=el('span');
 s.appendChild(el('span',{class:'sw',style:'background:'+C[k]}));s.appendChild(
 document.createTextNode(k));lg.appendChild(s);}box.appendChild(lg);
 const rows=[];
 DATA.ranks.forEach((r,ri)=>{const persistent=r.parameters+r.gradients+r.optimizer+r.buffers;
  const pts=[];r.functions.forEach(f=>f.points.forEach(p=>pts.push([p[0],p[1],f.name])));
  const top=Math.max(r.peak,DATA.device_memory||0,1),W=900,H=220,n=Math.max(pts.length,1);
  const svg=sv('svg',{width:W,height:H+20,'data-rank':ri});
  const y=v=>H-v/top*H,x=i=>i/n*W;
  const bands=[['parameters',p=>r.parameters],['gradients',p=>r.gradients],
   ['optimizer',p=>r.optimizer],['buffers',p=>r.buffers],
   ['temporaries',p=>Math.max(0,p[0]-persistent-p[1])],['communication',p=>p[1]]];
  const base=pts.map(()=>0);
  bands.forEach(([name,f])=>{let d='';pts.forEach((p,i)=>{const b0=base[i],b1=b0+f(p);
   d+=(i?'L':'M')+x(i).toFixed(1)+' '+y(b1).toFixed(1)+'H'+x(i+1).toFixed(1);base[i]=b1;});
   for(let i=pts.length-1;i>=0;i--){const b0=base[i]-f(pts[i]);d+='L'+x(i+1).toFixed(1)+' '+
   y(b0).toFixed(1)+'H'+x(i).toFixed(1);}svg.appendChild(sv('path',{d:d+'Z',fill:C[name]}));});
  let prev=null;pts.forEach((p,i)=>{if(p[2]!==prev){svg.appendChild(sv('line',{x1:x(i),x2:x(i),
   y1:0,y2:H,stroke:'#333','stroke-dasharray':'3 3'}));const t=sv('text',{x:x(i)+3,y:H+14,
   'font-size':11});t.textContent=p[2];svg.appendChild(t);prev=p[2];}});
  if(DATA.device_memory){svg.appendChild(sv('line',{x1:0,x2:W,y1:y(DATA.device_memory),
   y2:y(DATA.device_memory),stroke:'#b00'}));}
  box.appendChild(el('h3',{},r.name+': peak '+mib(r.peak)));box.appendChild(svg);
  box.appendChild(el('p',{},'highest point of the timeline: '));
  box.lastChild.appendChild(el('span',{class:'curve-peak'},String(Math.max(0,...pts.map(
   p=>p[0])))));box.lastChild.appendChild(document.createTextNode(' bytes'));
  rows.push([r.name,r.parameters,r.gradients,r.optimizer,r.activations,r.inputs,
   r.communication,r.peak,r.buffers]);});
 table(box,['rank','parameters','gradients','optimizer','activations','inputs',
  'communication','peak','buffers'],rows,'memory-table');}
function drawSchedule(){if(!DATA.schedule.length)return;
 const box=document.getElementById('schedule');
 box.appendChild(el('h2',{},'Pipeline schedule (the cost model\'s simulation; time in FLOPs)'));
 let end=1;DATA.schedule.forEach(r=>r.forEach(s=>end=Math.max(end,s.e)));
 const W=900,RH=22,svg=sv('svg',{width:W+60,height:RH*DATA.schedule.length+4});
 DATA.schedule.forEach((r,ri)=>{const t=sv('text',{x:0,y:ri*RH+15,'font-size':11});
  t.textContent='rank '+ri;svg.appendChild(t);r.forEach(s=>{const g=sv('rect',{x:60+s.s/end*W,
  y:ri*RH+2,width:Math.max(1,(s.e-s.s)/end*W),height:RH-4,fill:s.b?'#f28e2b':'#4e79a7',
  class:'phase'});const ti=sv('title',{});ti.textContent=s.l;g.appendChild(ti);
  svg.appendChild(g);});});box.appendChild(svg);}
function drawComm(){const box=document.getElementById('comm');
 box.appendChild(el('h2',{},'Communication per rank and mesh axis, per step'));
 DATA.comm.forEach(c=>{box.appendChild(el('h3',{},c.rank));
  if(!c.rows.length){box.appendChild(el('p',{},'none'));return;}
  table(box,['axes','collective','calls','bytes','seconds'],c.rows.map(r=>[r.axes,r.kind,
   r.calls,r.bytes,r.seconds===undefined?'-':r.seconds.toPrecision(4)]),'comm-table');});}
function drawCandidates(){if(!DATA.candidates)return;
 const box=document.getElementById('candidates');
 box.appendChild(el('h2',{},'Layouts, ranked (fitting first, fastest first)'));
 table(box,['rank','layout','zero','micro','gas','rc','v','peak','step_s','compute_s',
  'comm_s','mfu','why not'],DATA.candidates.slice(0,200).map(c=>[c.rank||'-','dp='+c.dp+' tp='+c.tp+
  ' pp='+c.pp+' sp='+c.sp,c.zero_stage,c.micro_batch,c.gradient_accumulation_steps,
  c.recompute?'y':'-',c.virtual_stages,c.peak_bytes||'-',
  c.step_s===undefined?'-':c.step_s.toPrecision(4),
  c.compute_s===undefined?'-':c.compute_s.toPrecision(4),
  c.comm_s===undefined?'-':c.comm_s.toPrecision(4),c.mfu===undefined?'-':c.mfu.toFixed(3),
  c.why||'']),'candidate-table');
 if(DATA.candidates.length>200)box.appendChild(el('p',{},(DATA.candidates.length-200)+
  ' more in --plan-json'));}
document.getElementById('title').textContent=DATA.title;
document.getElementById('summary').textContent=DATA.summary;
drawMemory();drawSchedule();drawComm();drawCandidates();
document.getElementById('status').textContent='rendered';
</script></body></html>
)";
} // namespace

LogicalResult mlir::ds::writePlanReport(ModuleOp step, const ClusterSpec *cluster,
                                        const std::string *candidatesJSON,
                                        int64_t deviceMemory, llvm::StringRef title,
                                        llvm::raw_ostream &os) {
  FailureOr<PlannedStep> planned = planStep(step);
  if (failed(planned))
    return failure();
  const MemoryPlan &plan = planned->plan;
  auto run = step->getAttrOfType<RunAttr>(kRunAttrName);
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttrName);
  std::string summary = "ZeRO stage " + std::to_string(run ? run.getZeroStage() : 0) + ", " +
                        std::to_string(mesh ? mesh.getNumRanks() : 1) + " ranks";
  if (mesh)
    summary += ", mesh " + mesh.str();
  summary += ", " + std::to_string(gradientAccumulationSteps(step)) +
             " micro-steps per optimizer step";
  if (cluster)
    summary += "; on " + cluster->name;
  json::Object data{{"title", title.str()},
                    {"summary", summary},
                    {"device_memory", deviceMemory},
                    {"ranks", memoryOf(*planned->step, plan)},
                    {"schedule", scheduleOf(step)},
                    {"comm", commOf(step, cluster)}};
  if (candidatesJSON) {
    auto parsed = json::parse(*candidatesJSON);
    if (!parsed)
      return step.emitError() << "--plan-report: " << llvm::toString(parsed.takeError());
    if (auto *o = parsed->getAsObject(); o && o->get("candidates"))
      data["candidates"] = std::move(*o->get("candidates"));
  }
  // The JSON goes inside a <script>: "</" must not appear in it.
  std::string text;
  llvm::raw_string_ostream(text) << json::Value(std::move(data));
  for (size_t at = 0; (at = text.find("</", at)) != std::string::npos; at += 3)
    text.replace(at, 2, "<\\/");
  os << kHead << text << kScript;
  return success();
}
