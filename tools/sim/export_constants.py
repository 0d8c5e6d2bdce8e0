"""Print the planar model constants of an MJCF model as MuJoCo compiles them, in the units and
coordinates of grove's envs/*.ron (plane coordinates (u, w), angles about the plane normal n).

usage: python3 tools/sim/export_constants.py MODEL.xml [xy|xz] [--ron]   (--ron: the `bodies` list as RON)
Used to write the `bodies` and `contacts` sections of envs/*.ron; tools/sim/validate.py checks
the numbers grove compiles (`grove rollout --print-model`) against the same MjModel.
"""
import sys
import numpy as np
import mujoco

def plane(kind):
    if kind == "xy":
        return np.array([1., 0, 0]), np.array([0, 1., 0]), np.array([0, 0, 1.])
    return np.array([1., 0, 0]), np.array([0, 0, 1.]), np.array([0, -1., 0])

def mat(q):
    r = np.zeros(9); mujoco.mju_quat2Mat(r, q); return r.reshape(3, 3)

def body_constants(m, eu, ew, n):
    out = []
    for b in range(1, m.nbody):
        R = mat(m.body_iquat[b]); I = m.body_inertia[b]
        k = int(np.argmax([abs(R[:, i] @ n) for i in range(3)]))
        assert abs(abs(R[:, k] @ n) - 1) < 1e-12, "a principal axis must be the plane normal"
        l, t = [i for i in range(3) if i != k]
        # e_t must be perp(e_l) in the plane: swap l and t if needed
        el = np.array([R[:, l] @ eu, R[:, l] @ ew]); et = np.array([R[:, t] @ eu, R[:, t] @ ew])
        if abs(et @ np.array([-el[1], el[0]])) < 0.5:
            raise SystemExit("unexpected inertia frame")
        Rb = mat(m.body_quat[b]); x = Rb[:, 0]
        out.append(dict(
            name=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b),
            parent=int(m.body_parentid[b]) - 1,
            pos=(m.body_pos[b] @ eu, m.body_pos[b] @ ew),
            angle=float(np.arctan2(x @ ew, x @ eu)),
            mass=float(m.body_mass[b]),
            com=(m.body_ipos[b] @ eu, m.body_ipos[b] @ ew),
            inertia=(I[l], I[t], I[k]),
            inertia_angle=float(np.arctan2(el[1], el[0])),
        ))
    return out

def main():
    m = mujoco.MjModel.from_xml_path(sys.argv[1])
    eu, ew, n = plane(sys.argv[2] if len(sys.argv) > 2 else "xz")
    for b in body_constants(m, eu, ew, n):
        print(b)
    for j in range(m.njnt):
        print(dict(joint=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j), body=int(m.jnt_bodyid[j]) - 1,
                   type=int(m.jnt_type[j]), axis=(m.jnt_axis[j] @ eu, m.jnt_axis[j] @ ew, m.jnt_axis[j] @ n),
                   pos=(m.jnt_pos[j] @ eu, m.jnt_pos[j] @ ew), qpos0=float(m.qpos0[m.jnt_qposadr[j]]),
                   range=tuple(m.jnt_range[j]) if m.jnt_limited[j] else None,
                   armature=float(m.dof_armature[m.jnt_dofadr[j]]), damping=float(m.dof_damping[m.jnt_dofadr[j]]),
                   stiffness=float(m.jnt_stiffness[j]), solref=tuple(m.jnt_solref[j]), solimp=tuple(m.jnt_solimp[j])))
    for g in range(m.ngeom):
        if m.geom_type[g] != mujoco.mjtGeom.mjGEOM_CAPSULE:
            continue
        ax = mat(m.geom_quat[g])[:, 2]; hl = m.geom_size[g, 1]; p = m.geom_pos[g]
        a, b = p + hl * ax, p - hl * ax
        print(dict(geom=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g), body=int(m.geom_bodyid[g]) - 1,
                   ends=((a @ eu, a @ ew), (b @ eu, b @ ew)), radius=float(m.geom_size[g, 0]),
                   contype=int(m.geom_contype[g]), friction=max(m.geom_friction[g, 0], m.geom_friction[0, 0]),
                   margin=float(m.geom_margin[g] + m.geom_margin[0]),
                   solref=tuple(0.5 * (m.geom_solref[g] + m.geom_solref[0])),
                   solimp=tuple(0.5 * (m.geom_solimp[g] + m.geom_solimp[0]))))
    print(dict(timestep=m.opt.timestep, integrator=int(m.opt.integrator), density=m.opt.density,
               viscosity=m.opt.viscosity, gravity=(m.opt.gravity @ eu, m.opt.gravity @ ew),
               floor_w=float(m.geom_pos[0] @ ew)))
    for a in range(m.nu):
        print(dict(actuator=a, joint=int(m.actuator_trnid[a, 0]), gear=float(m.actuator_gear[a, 0]),
                   ctrlrange=tuple(m.actuator_ctrlrange[a])))


def ron(path, kind, contacts_only=False):
    """The `bodies` list of an envs/*.ron file, from MuJoCo's compiled model."""
    m = mujoco.MjModel.from_xml_path(path)
    eu, ew, n = plane(kind)
    f = lambda x: repr(float(x))
    pair = lambda p: f"({f(p[0])}, {f(p[1])})"
    names = {b: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(m.nbody)}
    lines = ["    bodies: ["]
    for i, b in enumerate(body_constants(m, eu, ew, n)):
        bid = i + 1
        lines.append("        (")
        lines.append(f'            name: "{b["name"]}",')
        if b["parent"] >= 0:
            lines.append(f'            parent: Some("{names[b["parent"] + 1]}"),')
        lines.append(f'            pos: {pair(b["pos"])},')
        if b["angle"] != 0:
            lines.append(f'            angle: {f(b["angle"])},')
        lines.append(f'            mass: {f(b["mass"])},')
        lines.append(f'            com: {pair(b["com"])},')
        lines.append(f'            inertia: ({", ".join(f(x) for x in b["inertia"])}),')
        if b["inertia_angle"] != 0:
            lines.append(f'            inertia_angle: {f(b["inertia_angle"])},')
        lines.append("            joints: [")
        for j in range(m.njnt):
            if m.jnt_bodyid[j] != bid:
                continue
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
            ax = m.jnt_axis[j]
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE:
                kind_s = f"Slide(axis: ({f(ax @ eu)}, {f(ax @ ew)}))"
            else:
                kind_s = f"Hinge(sign: {f(round(ax @ n))})"
            d = m.jnt_dofadr[j]
            extra = []
            if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_SLIDE and np.any(m.jnt_pos[j] != 0):
                extra.append(f"pos: {pair((m.jnt_pos[j] @ eu, m.jnt_pos[j] @ ew))}")
            if m.qpos0[m.jnt_qposadr[j]] != 0:
                extra.append(f"ref: {f(m.qpos0[m.jnt_qposadr[j]])}")
            for key, val in (("armature", m.dof_armature[d]), ("damping", m.dof_damping[d]), ("stiffness", m.jnt_stiffness[j]),
                             ("spring_ref", m.qpos_spring[m.jnt_qposadr[j]])):
                if val != 0:
                    extra.append(f"{key}: {f(val)}")
            if m.jnt_limited[j]:
                extra.append(f"range: Some({pair(m.jnt_range[j])})")
                if tuple(m.jnt_solref[j]) != (0.02, 1.0):
                    extra.append(f"solref: {pair(m.jnt_solref[j])}")
                if tuple(m.jnt_solimp[j]) != (0.9, 0.95, 0.001, 0.5, 2.0):
                    extra.append(f"solimp: ({', '.join(f(x) for x in m.jnt_solimp[j])})")
            lines.append(f'                (name: "{name}", kind: {kind_s}' + "".join(", " + e for e in extra) + "),")
        lines.append("            ],")
        caps = [g for g in range(m.ngeom) if m.geom_bodyid[g] == bid and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE]
        if caps:
            lines.append("            capsules: [")
            for g in caps:
                ax = mat(m.geom_quat[g])[:, 2]; hl = m.geom_size[g, 1]; p = m.geom_pos[g]
                a, c = p + hl * ax, p - hl * ax
                name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
                lines.append(f'                (name: "{name}", from: {pair((a @ eu, a @ ew))}, to: {pair((c @ eu, c @ ew))}, '
                             f'radius: {f(m.geom_size[g, 0])}, friction: {f(max(m.geom_friction[g, 0], m.geom_friction[0, 0]))}, '
                             f'margin: {f(m.geom_margin[g] + m.geom_margin[0])}, '
                             f'solref: {pair(0.5 * (m.geom_solref[g] + m.geom_solref[0]))}, '
                             f'solimp: ({", ".join(f(x) for x in 0.5 * (m.geom_solimp[g] + m.geom_solimp[0]))})),')
            lines.append("            ],")
        lines.append("        ),")
    lines.append("    ],")
    colliding = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(1, m.ngeom) if m.geom_contype[g] & m.geom_conaffinity[0] or m.geom_conaffinity[g] & m.geom_contype[0]]
    lines.append(f"    // colliding with the floor: {colliding}")
    lines.append(f"    // actuators: {[(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, m.actuator_trnid[a, 0]), float(m.actuator_gear[a, 0])) for a in range(m.nu)]}")
    lines.append(f"    // option: timestep {m.opt.timestep}, integrator {m.opt.integrator}, gravity {m.opt.gravity}")
    return "\n".join(lines)

if __name__ == "__main__":
    if "--ron" in sys.argv:
        args = [a for a in sys.argv[1:] if a != "--ron"]
        print(ron(args[0], args[1] if len(args) > 1 else "xz"))
    else:
        main()
